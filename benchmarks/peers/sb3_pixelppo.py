"""Stable-Baselines3 PPO end to end on 84x84x4 uint8 frames, the settings of `pixelppo_common`.

``PPO("CnnPolicy")``: SB3's NatureCNN (the same convolutions and 512-unit
layer, shared by the policy and value heads), frames scaled by 255 inside the
policy, channels moved first by its automatic ``VecTransposeImage``; the 8
sub-envs in a ``DummyVecEnv`` (SB3's choice for cheap envs). A repeat: env
steps per second of whole ``learn`` iterations (a rollout of 128 steps, then
4 epochs of 4 minibatches) over a window, after one warm-up iteration.
"""

from __future__ import annotations

import _common as c

c.repo_root_on_path()
c.set_threads()

import pixelppo_common as pc  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

from benchmarks.pixel_env import SyntheticPixels  # noqa: E402


def main() -> None:
    a = c.args()
    env = make_vec_env(SyntheticPixels, n_envs=pc.NUM_ENVS, seed=a.seed)
    model = PPO(
        "CnnPolicy",
        env,
        n_steps=pc.ROLLOUT,
        batch_size=pc.MINIBATCH,
        n_epochs=pc.EPOCHS,
        learning_rate=pc.LR,
        gamma=pc.GAMMA,
        gae_lambda=pc.GAE_LAMBDA,
        clip_range=pc.CLIP,
        ent_coef=pc.ENT,
        vf_coef=pc.VF,
        max_grad_norm=pc.MAX_GRAD_NORM,
        seed=a.seed,
        device="cpu",
        verbose=0,
    )

    def iteration() -> int:
        model.learn(total_timesteps=pc.BATCH, reset_num_timesteps=False)
        return pc.BATCH

    c.begin(pc.CASE)
    rates = c.timed_rate(iteration, a.seconds, a.repeats)
    c.result(pc.CASE, rates, "env steps/s", env_steps=int(model.num_timesteps))


if __name__ == "__main__":
    main()
