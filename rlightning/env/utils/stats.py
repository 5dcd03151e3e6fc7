"""`GroupStats`: the env group's counters, kept as plain Python for `EnvGroup.stats()`."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Optional, Tuple

import numpy as np

from rlightning.env.utils.episodes import episode_report

RECENT_EPISODES = 100
RATE_WINDOW = 64


class GroupStats:
    """Env steps, a recent steps-per-second rate, finished episodes and restarts.

    Args:
        env_ids: The group's env ids (restart counts start at 0 for each).
        recent: How many finished episodes to keep for returns and lengths.
    """

    def __init__(self, env_ids: Iterable[str], recent: int = RECENT_EPISODES) -> None:
        self.env_steps = 0
        self.episodes = 0
        self.recent_returns: Deque[float] = deque(maxlen=recent)
        self.recent_lengths: Deque[int] = deque(maxlen=recent)
        self.restarts: Dict[str, int] = {env_id: 0 for env_id in env_ids}
        self._marks: Deque[Tuple[float, int]] = deque(maxlen=RATE_WINDOW)

    def add_steps(self, env_steps: int) -> None:
        """Count ``env_steps`` sub-env steps done now."""
        self.env_steps += env_steps
        self._marks.append((time.perf_counter(), self.env_steps))

    def add_env_rets(self, env_rets: Iterable[Any]) -> None:
        """Harvest finished episodes from EnvRets (their done rows' ``episode_return`` / ``episode_length``)."""
        for env_ret in env_rets:
            term = env_ret.last_terminated
            if isinstance(term, np.ndarray):
                if not np.count_nonzero(term) and not np.count_nonzero(env_ret.last_truncated):
                    continue
            returns, lengths = episode_report(env_ret)
            self.add_episodes(returns, lengths)

    def add_episodes(self, returns: List[float], lengths: List[int]) -> None:
        """Record finished episodes."""
        if returns:
            self.episodes += len(returns)
            self.recent_returns.extend(returns)
            self.recent_lengths.extend(lengths)

    def add_restart(self, env_id: str) -> None:
        """Count one restart of ``env_id``."""
        self.restarts[env_id] = self.restarts.get(env_id, 0) + 1

    def steps_per_second(self) -> float:
        """Env steps per second over the recent step calls (0.0 before two calls)."""
        if len(self._marks) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self._marks[0], self._marks[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def snapshot(self) -> Dict[str, Any]:
        """Plain dict of every counter."""
        returns = list(self.recent_returns)
        lengths = list(self.recent_lengths)
        return {
            "env_steps": self.env_steps,
            "env_steps_per_s": self.steps_per_second(),
            "episodes": self.episodes,
            "recent_returns": returns,
            "recent_lengths": lengths,
            "mean_return": mean_or_none(returns),
            "mean_length": mean_or_none(lengths),
            "restarts": dict(self.restarts),
            "total_restarts": int(sum(self.restarts.values())),
        }


def mean_or_none(values: List[float]) -> Optional[float]:
    """Mean of ``values``, or None when empty."""
    return float(np.mean(values)) if values else None
