"""RLlib PPO (new API stack) end to end on 84x84x4 frames, the settings of `pixelppo_common`.

One remote EnvRunner with the 8 sub-envs (RLlib's sampling always leaves the
driver, which holds the learner: ``num_learners=0``); RLlib's default CNN
encoder with the Nature convolutions, then 512-unit policy and value head
layers on the shared encoder (``vf_share_layers``), frames scaled to float32 /
255 in the env as RLlib's Atari setup does (see `rllib_pixels`). A repeat: env
steps per second of whole ``train()`` iterations (1024 env steps sampled, 4
epochs of 4 minibatches) over a window, after one warm-up iteration.
"""

from __future__ import annotations

import _common as c

c.repo_root_on_path()
c.set_threads()

import pixelppo_common as pc  # noqa: E402
import rllib_common as rc  # noqa: E402
from rllib_pixels import NATURE, _make_env  # noqa: E402


def config():
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.tune.registry import register_env

    register_env("synthetic_pixels", _make_env)
    return (
        PPOConfig()
        .environment("synthetic_pixels")
        .env_runners(
            num_env_runners=1,
            num_envs_per_env_runner=pc.NUM_ENVS,
            rollout_fragment_length=pc.ROLLOUT,
            num_cpus_per_env_runner=1,
        )
        .learners(num_learners=0)
        .rl_module(
            model_config=DefaultModelConfig(
                conv_filters=NATURE, conv_activation="relu", head_fcnet_hiddens=[512], vf_share_layers=True
            )
        )
        .training(
            train_batch_size_per_learner=pc.BATCH,
            minibatch_size=pc.MINIBATCH,
            num_epochs=pc.EPOCHS,
            lr=pc.LR,
            gamma=pc.GAMMA,
            lambda_=pc.GAE_LAMBDA,
            clip_param=pc.CLIP,
            entropy_coeff=pc.ENT,
            vf_loss_coeff=pc.VF,
            grad_clip=pc.MAX_GRAD_NORM,
            grad_clip_by="global_norm",
            use_kl_loss=False,
            kl_coeff=0.0,
        )
    )


def main() -> None:
    a = c.args()
    rc.start_ray()
    algo = config().debugging(seed=a.seed).build_algo()
    sampled = [0]

    def iteration() -> int:
        res = algo.train()
        total = int(res.get("env_runners", {}).get("num_env_steps_sampled_lifetime", 0) or 0)
        done, sampled[0] = total - sampled[0], total
        return done

    c.begin(pc.CASE)
    rates = c.timed_rate(iteration, a.seconds, a.repeats)
    c.result(pc.CASE, rates, "env steps/s", env_steps=sampled[0])
    algo.stop()


if __name__ == "__main__":
    main()
