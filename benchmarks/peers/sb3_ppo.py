"""Stable-Baselines3 PPO to a target return: CartPole-v1 (case ``solve``) and LunarLander-v3 (case ``lunar``).

``solve``: the mean return of the last 20 episodes >= 475 on CartPole-v1, with
rl-baselines3-zoo's tuned hyperparameters (hyperparams/ppo.yml): 8 envs,
n_steps 32, batch 256, gae_lambda 0.8, gamma 0.98, 20 epochs, no entropy
bonus, learning rate and clip range annealed linearly from 1e-3 and 0.2 over
1e5 steps. ``lunar``: >= 200 on LunarLander-v3 with the zoo's LunarLander
settings: 16 envs, n_steps 1024, batch 64, 4 epochs, gamma 0.999, gae_lambda
0.98, entropy 0.01, SB3's defaults otherwise (lr 3e-4, clip 0.2), 1e6 steps
(needs the ``box2d`` package).

Timed from the built model to the rollout that reaches the target (checked
after every rollout on the last 20 of SB3's episode buffer; training stops at
the next env step), as ``rlightning_ppo.py`` times rlightning's built engine;
``--max-seconds`` caps the run. Within the zoo's budget of env steps, or it is
reported unsolved.
"""

from __future__ import annotations

import time

import _common as c

c.set_threads()

import numpy as np  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.callbacks import BaseCallback  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402

WINDOW = 20


def linear(start: float):
    return lambda progress_remaining: progress_remaining * start


#: case -> (env id, target return, env step budget, n_envs, PPO keyword arguments): the zoo's settings.
CASES = {
    "solve": (
        "CartPole-v1",
        475.0,
        100_000,
        8,
        dict(
            n_steps=32,
            batch_size=256,
            gae_lambda=0.8,
            gamma=0.98,
            n_epochs=20,
            ent_coef=0.0,
            learning_rate=linear(1e-3),
            clip_range=linear(0.2),
        ),
    ),
    "lunar": (
        "LunarLander-v3",
        200.0,
        1_000_000,
        16,
        dict(n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01),
    ),
}


class StopAtTarget(BaseCallback):
    """Checks the last 20 episodes after every rollout; stops training at the target or the time cap."""

    def __init__(self, t0: float, max_seconds: float, target: float) -> None:
        super().__init__()
        self.t0, self.max_seconds, self.target = t0, max_seconds, target
        self.rollouts, self.last, self.stop = 0, 0.0, False

    def _on_step(self) -> bool:
        return not self.stop

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        eps = [e["r"] for e in self.model.ep_info_buffer][-WINDOW:]
        self.last = float(np.mean(eps)) if len(eps) >= WINDOW else 0.0
        capped = self.max_seconds and time.perf_counter() - self.t0 >= self.max_seconds
        self.stop = self.last >= self.target or bool(capped)


def main() -> None:
    a = c.args()
    unknown = [k for k in a.cases if k not in CASES]
    if unknown:
        raise SystemExit(f"sb3_ppo.py: unknown case(s) {unknown}; valid: {sorted(CASES)}")
    for case in a.cases or ["solve"]:
        env_id, target, budget, n_envs, kwargs = CASES[case]
        env = make_vec_env(env_id, n_envs=n_envs, seed=a.seed)
        model = PPO("MlpPolicy", env, seed=a.seed, device="cpu", verbose=0, **kwargs)
        c.begin(case)
        t0 = time.perf_counter()
        cb = StopAtTarget(t0, a.max_seconds, target)
        model.learn(total_timesteps=budget, callback=cb)  # the zoo's budget: its schedules anneal over it
        seconds = time.perf_counter() - t0
        c.result(
            case,
            [seconds],
            "s",
            env_steps=int(model.num_timesteps),
            iterations=cb.rollouts,
            final_return=cb.last,
            solved=cb.last >= target,
            capped=bool(a.max_seconds) and cb.last < target,
        )


if __name__ == "__main__":
    main()
