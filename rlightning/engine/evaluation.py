"""`Evaluator`: deterministic evaluation episodes, on an env group of its own.

The engine holds one (``engine.evaluator``); it builds a local env group the
first time it is asked for episodes and closes it with the engine. The policy
group's acting workers play (its eval workers, or train worker 0 where there
are none, as with ``cluster.inference="env_workers"``).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from rlightning.env.utils.episodes import done_mask

__all__ = ["Evaluator", "evaluate_policy"]


class Evaluator:
    """Plays deterministic episodes with a policy group.

    Args:
        config: The run's `MainConfig` (env settings and seed).
        policy_group: Acts (``rollout_batch``, ``set_deterministic``).
    """

    def __init__(self, config: Any, policy_group: Any) -> None:
        self.config = config
        self.policy_group = policy_group
        self.env_group: Optional[Any] = None

    def _own_env_group(self, num_envs: int) -> Any:
        if self.env_group is None:
            from rlightning.env.builder import build_env_group

            env_cfg = self.config.env.model_copy(update={"num_workers": 1, "num_envs": num_envs})
            group = build_env_group(env_cfg, remote=False)  # local, whatever the training env group's placement
            group.init()
            self.env_group = group
        return self.env_group

    def evaluate(
        self, num_episodes: int, iteration: int = 0, group: Any = None, max_steps: int = 100_000
    ) -> Dict[str, Any]:
        """Play ``num_episodes`` episodes with deterministic actions; return mean/std/min/max return and length.

        Args:
            num_episodes: Episodes to finish.
            iteration: Offsets the env seed (each evaluation round plays other episodes).
            group: The env group to play in (default: a local one of the evaluator's own, made once).
            max_steps: Give up after this many vectorised steps.

        Raises:
            ValueError: ``num_episodes`` below 1.
            RuntimeError: no episode finished within ``max_steps``.
        """
        if isinstance(num_episodes, bool) or not isinstance(num_episodes, int) or num_episodes < 1:
            raise ValueError(f"num_episodes must be an int >= 1, got {num_episodes!r}")
        if group is None:
            group = self._own_env_group(num_envs=min(num_episodes, 8))
        policy_group = self.policy_group
        returns: List[float] = []
        lengths: List[float] = []
        policy_group.set_deterministic(True)
        try:
            rets = group.reset(seed=self.config.seed + 100_003 + iteration)
            for _ in range(max_steps):
                resps = policy_group.rollout_batch(rets)
                rets = group.step(resps)
                for _, ret in rets.items():
                    # multi-agent flags are dicts per agent: a row's episode ends when every agent is done
                    done = done_mask(ret.last_terminated, ret.last_truncated)
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

    def close(self) -> None:
        """Close the evaluator's own env group, if it made one."""
        if self.env_group is not None:
            self.env_group.close()
            self.env_group = None


def evaluate_policy(engine: Any, num_episodes: int, group: Any = None, max_steps: int = 100_000) -> Dict[str, Any]:
    """`Evaluator.evaluate` with ``engine``'s evaluator and iteration (kept for callers of the function)."""
    return engine.evaluator.evaluate(num_episodes, engine.iteration, group=group, max_steps=max_steps)
