"""Deterministic evaluation episodes on an env group of their own."""

from __future__ import annotations

from typing import Any, Dict, List

import numpy as np

_ATTR = "_eval_env_group"


def _eval_env_group(engine: Any, num_envs: int) -> Any:
    group = getattr(engine, _ATTR, None)
    if group is None:
        from rlightning.env.builder import build_env_group

        env_cfg = engine.config.env.model_copy(update={"num_workers": 1, "num_envs": num_envs})
        group = build_env_group(env_cfg, remote=False)  # local, whatever the training env group's placement
        group.init()
        setattr(engine, _ATTR, group)
    return group


def close_eval_env(engine: Any) -> None:
    """Close the evaluation env group of ``engine``, if one was made."""
    group = getattr(engine, _ATTR, None)
    if group is not None:
        group.close()
        setattr(engine, _ATTR, None)


def evaluate_policy(engine: Any, num_episodes: int, group: Any = None, max_steps: int = 100_000) -> Dict[str, Any]:
    """Play ``num_episodes`` episodes with deterministic actions; return mean/std/min/max return and length.

    Args:
        engine: The engine whose policy group acts.
        num_episodes: Episodes to finish.
        group: The env group to play in (default: a local one of the engine's own, made once).
        max_steps: Give up after this many vectorised steps.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    if group is None:
        group = _eval_env_group(engine, num_envs=min(num_episodes, 8))
    policy_group = engine.policy_group
    returns: List[float] = []
    lengths: List[float] = []
    policy_group.set_deterministic(True)
    try:
        rets = group.reset(seed=engine.config.seed + 100_003 + engine.iteration)
        for _ in range(max_steps):
            resps = policy_group.rollout_batch(rets)
            rets = group.step(resps)
            for _, ret in rets.items():
                done = np.logical_or(ret.last_terminated, ret.last_truncated)
                for row in np.flatnonzero(done):
                    returns.append(float(ret.info["episode_return"][row]))
                    lengths.append(float(ret.info["episode_length"][row]))
            if len(returns) >= num_episodes:
                break
    finally:
        policy_group.set_deterministic(False)
    returns, lengths = returns[:num_episodes], lengths[:num_episodes]
    if not returns:
        raise RuntimeError(f"evaluation finished no episode in {max_steps} steps")
    return {
        "return_mean": float(np.mean(returns)),
        "return_std": float(np.std(returns)),
        "return_min": float(np.min(returns)),
        "return_max": float(np.max(returns)),
        "length_mean": float(np.mean(lengths)),
        "episodes": len(returns),
    }
