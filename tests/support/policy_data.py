"""Spaces, env returns and datasets for the policy tests (no buffer or env group needed)."""

from __future__ import annotations

from typing import List, Tuple

import gymnasium as gym
import numpy as np
import torch
from tensordict import TensorDict

from rlightning.types import BatchedData, EnvMeta, EnvRet

DISCRETE_META = EnvMeta("Toy-0", gym.spaces.Discrete(2), gym.spaces.Box(-1.0, 1.0, (4,), np.float32), 3)
CONTINUOUS_META = EnvMeta(
    "ToyC-0", gym.spaces.Box(-2.0, 2.0, (2,), np.float32), gym.spaces.Box(-1.0, 1.0, (3,), np.float32), 3
)


def env_ret(env_id: str, num_envs: int = 3, obs_dim: int = 4, seed: int = 0) -> EnvRet:
    rng = np.random.default_rng(seed)
    return EnvRet(
        env_id=env_id,
        observation=rng.standard_normal((num_envs, obs_dim)).astype(np.float32),
        last_reward=np.zeros(num_envs, np.float32),
        last_terminated=np.zeros(num_envs, bool),
        last_truncated=np.zeros(num_envs, bool),
    )


def env_batch(n: int, num_envs: int = 3, obs_dim: int = 4) -> BatchedData:
    rets = [env_ret(f"Toy-{i}", num_envs, obs_dim, seed=i) for i in range(n)]
    return BatchedData([r.env_id for r in rets], rets)


def ppo_dataset(n: int = 64, obs_dim: int = 4, seed: int = 0, continuous_dim: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    action = torch.randn(n, continuous_dim, generator=g) if continuous_dim else torch.randint(0, 2, (n,), generator=g)
    return TensorDict(
        {
            "obs": torch.randn(n, obs_dim, generator=g),
            "action": action,
            "log_prob": torch.full((n,), -0.7),
            "value": torch.zeros(n),
            "advantage": torch.randn(n, generator=g),
            "return": torch.randn(n, generator=g),
        },
        batch_size=[n],
    )


def offpolicy_dataset(n: int = 32, obs_dim: int = 3, act_dim: int = 2, discrete: bool = False, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    action = torch.randint(0, 2, (n,), generator=g) if discrete else torch.rand(n, act_dim, generator=g) * 4 - 2
    return TensorDict(
        {
            "obs": torch.randn(n, obs_dim, generator=g),
            "action": action,
            "reward": torch.randn(n, generator=g),
            "next_obs": torch.randn(n, obs_dim, generator=g),
            "terminated": torch.zeros(n, dtype=torch.bool),
        },
        batch_size=[n],
    )


def compute_gae(
    rewards: np.ndarray, values: np.ndarray, dones: np.ndarray, last_value: np.ndarray, gamma: float, lam: float
) -> Tuple[np.ndarray, np.ndarray]:
    """GAE over [T, N] arrays where dones[t] means the episode ended after step t."""
    T = rewards.shape[0]
    adv = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1], np.float32)
    for t in reversed(range(T)):
        next_value = last_value if t == T - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_value * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv, adv + values


def cartpole_ppo_rollout(policy, envs, obs: np.ndarray, steps: int, gamma: float, lam: float, returns: List[float]):
    """Collect ``steps`` vector steps with ``policy.rollout_step`` (same-step autoreset); returns (td, obs)."""
    num_envs = obs.shape[0]
    buf = {k: [] for k in ("obs", "action", "log_prob", "value", "reward", "done")}
    running = np.zeros(num_envs)
    for _ in range(steps):
        resp = policy.rollout_step(EnvRet(env_id="cp", observation=obs.astype(np.float32)))
        next_obs, reward, term, trunc, _ = envs.step(resp.action)
        done = np.logical_or(term, trunc)
        running += reward
        for i in np.flatnonzero(done):
            returns.append(running[i])
            running[i] = 0.0
        for k, v in (("obs", obs), ("action", resp.action), ("log_prob", resp.log_prob), ("value", resp.value)):
            buf[k].append(v)
        buf["reward"].append(reward.astype(np.float32))
        buf["done"].append(done.astype(np.float32))
        obs = next_obs
    last_value = policy.compute_actions(obs.astype(np.float32), deterministic=True)["value"]
    arr = {k: np.stack(v) for k, v in buf.items()}
    adv, ret = compute_gae(arr["reward"], arr["value"], arr["done"], last_value, gamma, lam)
    td = TensorDict(
        {
            "obs": torch.as_tensor(arr["obs"], dtype=torch.float32).reshape(steps * num_envs, -1),
            "action": torch.as_tensor(arr["action"]).reshape(-1),
            "log_prob": torch.as_tensor(arr["log_prob"]).reshape(-1),
            "value": torch.as_tensor(arr["value"]).reshape(-1),
            "advantage": torch.as_tensor(adv).reshape(-1),
            "return": torch.as_tensor(ret).reshape(-1),
        },
        batch_size=[steps * num_envs],
    )
    return td, obs
