"""RLlib pixel sampling: W remote EnvRunners x N synthetic pixel sub-envs, PPO's sampling phase, a Nature CNN.

The env is `benchmarks.pixel_env.SyntheticPixels` (84x84x4 uint8 frames),
registered with ``tune.register_env``. The RLModule is RLlib's default CNN
encoder with the Nature DQN convolutions (32 8x8/4, 64 4x4/2, 64 3x3/1, ReLU)
and a 512-unit policy head layer, the network rlightning's side acts with
(RLlib's sampling runs the policy head only; its value head is built but
used by the learner). The frames reach RLlib's network as float32 / 255, scaled
in the env as RLlib's own Atari setup does (its CNN does not take uint8). A
timed call collects 32 steps per sub-env from every EnvRunner
(``synchronous_parallel_sample``), as rlightning's pixel rollout does.
"""

from __future__ import annotations

import _common as c

c.repo_root_on_path()  # the workers import benchmarks.pixel_env (the env's entry point)
c.set_threads()

import rllib_common as rc  # noqa: E402
from rllib_sampling import measure  # noqa: E402

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


def main() -> None:
    a = c.args()
    rc.start_ray()
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    for case in a.cases or CASES:
        w, n = c.parse_case(case)
        measure(case, a, synchronous_parallel_sample, config=pixel_config(w, n), fragment=FRAGMENT)


if __name__ == "__main__":
    main()
