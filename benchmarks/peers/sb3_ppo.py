"""Stable-Baselines3 PPO on CartPole-v1 until the mean return of the last 20 episodes is >= 475.

rl-baselines3-zoo's tuned CartPole-v1 hyperparameters (hyperparams/ppo.yml):
8 envs, n_steps 32, batch 256, gae_lambda 0.8, gamma 0.98, 20 epochs, no
entropy bonus, learning rate and clip range annealed linearly from 1e-3 and
0.2 over 1e5 steps. Timed from the built model to the rollout that reaches the
target (checked after every rollout on the last 20 of SB3's episode buffer;
training stops at the next env step); ``--max-seconds`` caps the run. Within
the zoo's budget of 1e5 steps, or it is reported unsolved.
"""

from __future__ import annotations

import time

import _common as c

c.set_threads()

import numpy as np  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

TARGET, WINDOW, BUDGET = 475.0, 20, 100_000


def linear(start: float):
    return lambda progress_remaining: progress_remaining * start


class StopAtTarget(BaseCallback):
    """Checks the last 20 episodes after every rollout; stops training at the target or the time cap."""

    def __init__(self, t0: float, max_seconds: float) -> None:
        super().__init__()
        self.t0, self.max_seconds, self.rollouts, self.last, self.stop = t0, max_seconds, 0, 0.0, False

    def _on_step(self) -> bool:
        return not self.stop

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        eps = [e["r"] for e in self.model.ep_info_buffer][-WINDOW:]
        self.last = float(np.mean(eps)) if len(eps) >= WINDOW else 0.0
        capped = self.max_seconds and time.perf_counter() - self.t0 >= self.max_seconds
        self.stop = self.last >= TARGET or bool(capped)


def main() -> None:
    a = c.args()
    env = make_vec_env("CartPole-v1", n_envs=8, seed=a.seed)
    t0 = time.perf_counter()
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=20,
        ent_coef=0.0,
        learning_rate=linear(1e-3),
        clip_range=linear(0.2),
        seed=a.seed,
        device="cpu",
        verbose=0,
    )
    cb = StopAtTarget(t0, a.max_seconds)
    c.begin("solve")
    model.learn(total_timesteps=BUDGET, callback=cb)  # the zoo's budget: its schedules anneal over it
    steps = model.num_timesteps
    seconds = time.perf_counter() - t0
    c.result(
        "solve",
        [seconds],
        "s",
        env_steps=int(steps),
        iterations=cb.rollouts,
        final_return=cb.last,
        solved=cb.last >= TARGET,
        capped=bool(a.max_seconds) and cb.last < TARGET,
    )


if __name__ == "__main__":
    main()
