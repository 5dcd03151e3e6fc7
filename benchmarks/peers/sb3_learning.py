"""Stable-Baselines3 trained to a published budget with rl-baselines3-zoo's hyperparameters, then evaluated.

The SB3 side of the learning reference table (``benchmarks/learning.py``) and of ``benchmarks/run``'s
same-budget rows: ``--case dqn_cartpole`` trains DQN on CartPole-v1 for 50k env steps with the zoo's
``hyperparams/dqn.yml`` entry, then runs 10 deterministic evaluation episodes on a fresh env (seeded
``seed + 1000``). Prints one ``@@result`` line: the training wall-clock (from the built model to the
end of ``learn``; evaluation not included), the env steps, and the evaluation mean and std.

    python benchmarks/peers/sb3_learning.py --cases dqn_cartpole --seed 1
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Tuple

import _common as c

c.set_threads()

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import stable_baselines3 as sb3  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.noise import NormalActionNoise  # noqa: E402


def _td3_pendulum() -> Dict[str, Any]:
    return dict(
        gamma=0.98,
        buffer_size=200_000,
        learning_starts=10_000,
        action_noise=NormalActionNoise(np.zeros(1), 0.1 * np.ones(1)),
        gradient_steps=-1,
        train_freq=(1, "episode"),
        learning_rate=1e-3,
        policy_kwargs=dict(net_arch=[400, 300]),
    )


#: case -> (SB3 class, env id, env steps, zoo hyperparameters (a callable where they hold objects)).
CASES: Dict[str, Tuple[str, str, int, Callable[[], Dict[str, Any]]]] = {
    "dqn_cartpole": (
        "DQN",
        "CartPole-v1",
        50_000,
        lambda: dict(
            learning_rate=2.3e-3,
            batch_size=64,
            buffer_size=100_000,
            learning_starts=1000,
            gamma=0.99,
            target_update_interval=10,
            train_freq=256,
            gradient_steps=128,
            exploration_fraction=0.16,
            exploration_final_eps=0.04,
            policy_kwargs=dict(net_arch=[256, 256]),
        ),
    ),
    "dqn_acrobot": (
        "DQN",
        "Acrobot-v1",
        100_000,
        lambda: dict(
            learning_rate=6.3e-4,
            batch_size=128,
            buffer_size=50_000,
            learning_starts=0,
            gamma=0.99,
            target_update_interval=250,
            train_freq=4,
            gradient_steps=-1,
            exploration_fraction=0.12,
            exploration_final_eps=0.1,
            policy_kwargs=dict(net_arch=[256, 256]),
        ),
    ),
    "sac_pendulum": ("SAC", "Pendulum-v1", 20_000, lambda: dict(learning_rate=1e-3)),
    "td3_pendulum": ("TD3", "Pendulum-v1", 20_000, _td3_pendulum),
    "sac_mountaincar": (
        "SAC",
        "MountainCarContinuous-v0",
        50_000,
        lambda: dict(
            learning_rate=3e-4,
            buffer_size=50_000,
            batch_size=512,
            ent_coef=0.1,
            train_freq=32,
            gradient_steps=32,
            gamma=0.9999,
            tau=0.01,
            learning_starts=0,
            use_sde=True,
            policy_kwargs=dict(log_std_init=-3.67, net_arch=[64, 64]),
        ),
    ),
    # PPO LunarLander: the zoo's LunarLander-v2 entry (v3 is the same task on today's gymnasium); n_envs is the
    # vectorised env's size, not a PPO argument.
    "ppo_lunar": (
        "PPO",
        "LunarLander-v3",
        1_000_000,
        lambda: dict(n_envs=16, n_steps=1024, batch_size=64, gae_lambda=0.98, gamma=0.999, n_epochs=4, ent_coef=0.01),
    ),
}


def evaluate(model: Any, env_id: str, episodes: int, seed: int) -> Tuple[float, float]:
    """Mean and std of ``episodes`` deterministic episodes on a fresh env."""
    env = gym.make(env_id)
    returns = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + ep)
        done, total = False, 0.0
        while not done:
            action, _ = model.predict(obs, deterministic=True)
            obs, reward, term, trunc, _ = env.step(action)
            total += float(reward)
            done = term or trunc
        returns.append(total)
    env.close()
    return float(np.mean(returns)), float(np.std(returns))


def main() -> None:
    a = c.args(lambda p: p.add_argument("--episodes", type=int, default=10))
    for case in a.cases or ["dqn_cartpole"]:
        algo, env_id, budget, hyper = CASES[case]
        kwargs = hyper()
        n_envs = kwargs.pop("n_envs", 1)
        env = make_vec_env(env_id, n_envs=n_envs, seed=a.seed) if n_envs > 1 else env_id
        model = getattr(sb3, algo)("MlpPolicy", env, seed=a.seed, device="cpu", verbose=0, **kwargs)
        c.begin(case)
        t0 = time.perf_counter()
        model.learn(total_timesteps=budget)
        wall = time.perf_counter() - t0
        mean, std = evaluate(model, env_id, a.episodes, a.seed + 1000)
        c.result(
            case,
            [wall],
            "s",
            env_steps=int(model.num_timesteps),
            return_mean=mean,
            return_std=std,
            seed=a.seed,
            sb3=sb3.__version__,
        )


if __name__ == "__main__":
    main()
