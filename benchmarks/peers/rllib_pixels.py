"""RLlib pixel sampling: W remote EnvRunners x N synthetic pixel sub-envs, PPO's sampling phase, a Nature CNN.

The env is `benchmarks.pixel_env.SyntheticPixels` (84x84x4 uint8 frames),
registered with ``tune.register_env``. The RLModule is RLlib's default CNN
encoder with the Nature DQN convolutions (32 8x8/4, 64 4x4/2, 64 3x3/1, ReLU)
and a 512-unit policy head layer, the network rlightning's side acts with
(RLlib's sampling runs the policy head only; its value head is built but
used by the learner). The frames reach RLlib's network as float32 / 255, scaled
in the env as RLlib's own Atari setup does (its CNN does not take uint8). A timed call collects 32 steps per sub-env from every
EnvRunner (``synchronous_parallel_sample``), as rlightning's pixel rollout does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _common as c

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# RLlib's EnvRunners import benchmarks.pixel_env (the env) from the repository root.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
c.set_threads()

import rllib_common as rc  # noqa: E402

CASES = ("2x16",)
FRAGMENT = 32
NATURE = [[32, [8, 8], 4], [64, [4, 4], 2], [64, [3, 3], 1]]


def _make_env(_config=None):
    # RLlib's CNN encoder takes float frames: its Atari recipe scales them in the env (``NormalizedImageEnv``,
    # uint8 -> float32 / 255), so its samples carry float32 frames; the same here.
    import gymnasium as gym
    import numpy as np

    from benchmarks.pixel_env import SyntheticPixels

    env = SyntheticPixels()
    space = gym.spaces.Box(0.0, 1.0, env.observation_space.shape, dtype=np.float32)
    return gym.wrappers.TransformObservation(env, lambda o: o.astype(np.float32) / 255.0, space)


def pixel_config(w: int, n: int):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    register_env("synthetic_pixels", _make_env)
    batch = w * n * FRAGMENT
    return (
        PPOConfig()
        .environment("synthetic_pixels")
        .env_runners(
            num_env_runners=w, num_envs_per_env_runner=n, rollout_fragment_length=FRAGMENT, num_cpus_per_env_runner=1
        )
        .learners(num_learners=0)
        .rl_module(
            model_config=DefaultModelConfig(
                conv_filters=NATURE, conv_activation="relu", head_fcnet_hiddens=[512], vf_share_layers=True
            )
        )
        .training(train_batch_size_per_learner=batch, minibatch_size=batch, num_epochs=1)
    )


def measure(case: str, a, synchronous_parallel_sample) -> None:
    w, n = c.parse_case(case)
    algo = pixel_config(w, n).build_algo()
    group = algo.env_runner_group

    def sample() -> int:
        episodes = synchronous_parallel_sample(
            worker_set=group, max_env_steps=w * n * FRAGMENT, sample_timeout_s=300, _uses_new_env_runners=True
        )
        return sum(len(e) for e in episodes)

    sample()
    c.begin(case)
    c.result(case, c.timed_rate(sample, a.seconds, a.repeats), "env steps/s")
    algo.stop()


def main() -> None:
    a = c.args()
    rc.start_ray()
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    for case in a.cases or CASES:
        measure(case, a, synchronous_parallel_sample)


if __name__ == "__main__":
    main()
