"""`GroupStats`: the env group's counters, kept as plain Python for `EnvGroup.stats()`."""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Deque, Dict, Iterable, List, Optional, Tuple

import numpy as np

from rlightning.env.utils.episodes import done_mask

RECENT_EPISODES = 100
RATE_WINDOW = 64
HARVEST_EVERY = 256


class GroupStats:
    """Env steps, a recent steps-per-second rate, finished episodes, restarts and env errors.

    ``restarts`` counts every recreation of a worker (its actor died, or its env raised);
    ``env_errors`` counts the exceptions raised by the env's own code (each one recreates the
    worker, except the one past ``max_restarts``, which stops the run).

    Args:
        env_ids: The group's env ids (restart and error counts start at 0 for each).
        recent: How many finished episodes to keep for returns and lengths.
    """

    def __init__(self, env_ids: Iterable[str], recent: int = RECENT_EPISODES) -> None:
        self.env_steps = 0
        self._episodes = 0
        self.recent_returns: Deque[float] = deque(maxlen=recent)
        self.recent_lengths: Deque[int] = deque(maxlen=recent)
        self._recent = recent
        self.recent_agent_returns: Dict[str, Deque[float]] = {}  # multi-agent envs: agent id -> its returns
        self.env_agent_returns: Dict[str, Dict[str, Deque[float]]] = {}  # env id -> agent id -> its returns
        env_ids = list(env_ids)
        self.restarts: Dict[str, int] = {env_id: 0 for env_id in env_ids}
        self.env_errors: Dict[str, int] = {env_id: 0 for env_id in env_ids}
        self.timeouts: Dict[str, int] = {env_id: 0 for env_id in env_ids}  # calls past env.step_timeout_s
        self._marks: Deque[Tuple[float, int]] = deque(maxlen=RATE_WINDOW)
        # (terminated, truncated, episode_return, episode_length) of EnvRets not yet read: harvested in bulk.
        self._pending: List[tuple] = []

    @property
    def episodes(self) -> int:
        """Finished episodes seen so far."""
        self._harvest()
        return self._episodes

    def add_steps(self, env_steps: int) -> None:
        """Count ``env_steps`` sub-env steps done now."""
        self.env_steps += env_steps
        self._marks.append((time.perf_counter(), self.env_steps))

    def add_env_rets(self, env_rets: Iterable[Any]) -> None:
        """Note the done flags and episode totals of EnvRets; finished episodes are read from them in bulk.

        Only the small per-row arrays are kept (never observations), and they are never written after
        an env worker returns them.
        """
        pending = self._pending
        for env_ret in env_rets:
            info = env_ret.info
            pending.append(
                (
                    env_ret.last_terminated,
                    env_ret.last_truncated,
                    info.get("episode_return") if isinstance(info, dict) else None,
                    info.get("episode_length") if isinstance(info, dict) else None,
                )
            )
        if len(pending) >= HARVEST_EVERY:
            self._harvest()

    def _harvest(self) -> None:
        # Take what is there without swapping the list: a step in another thread may append meanwhile.
        count = len(self._pending)
        if not count:
            return
        pending = self._pending[:count]
        del self._pending[:count]
        flat = [p for p in pending if isinstance(p[0], np.ndarray) and p[2] is not None and p[3] is not None]
        others = [p for p in pending if not (isinstance(p[0], np.ndarray) and p[2] is not None and p[3] is not None)]
        if flat:
            done = np.concatenate([p[0] for p in flat]) | np.concatenate([p[1] for p in flat])
            if done.any():
                returns = np.concatenate([np.asarray(p[2]).reshape(-1) for p in flat])[done]
                lengths = np.concatenate([np.asarray(p[3]).reshape(-1) for p in flat])[done]
                self.add_episodes(returns.tolist(), lengths.tolist())
        for term, trunc, ret, length in others:
            if ret is None or length is None:
                continue
            done = np.asarray(done_mask(term, trunc), dtype=bool).reshape(-1)
            if done.any():
                self.add_episodes(
                    np.asarray(ret).reshape(-1)[done].tolist(), np.asarray(length).reshape(-1)[done].tolist()
                )

    def add_episodes(self, returns: List[float], lengths: List[int]) -> None:
        """Record finished episodes."""
        if returns:
            self._episodes += len(returns)
            self.recent_returns.extend(returns)
            self.recent_lengths.extend(lengths)

    def add_agent_episodes(self, agent_returns: Dict[str, List[float]], env_id: Optional[str] = None) -> None:
        """Record each agent's own return in finished episodes (multi-agent envs), of env ``env_id`` if given."""
        for agent, returns in agent_returns.items():
            self.recent_agent_returns.setdefault(agent, deque(maxlen=self._recent)).extend(returns)
            if env_id is not None:
                per_env = self.env_agent_returns.setdefault(env_id, {})
                per_env.setdefault(agent, deque(maxlen=self._recent)).extend(returns)

    def add_restart(self, env_id: str) -> None:
        """Count one restart of ``env_id``."""
        self.restarts[env_id] = self.restarts.get(env_id, 0) + 1

    def add_timeout(self, env_id: str) -> None:
        """Count one call of ``env_id`` that took longer than its timeout."""
        self.timeouts[env_id] = self.timeouts.get(env_id, 0) + 1

    def add_env_error(self, env_id: str) -> None:
        """Count one exception raised by the env code of ``env_id``."""
        self.env_errors[env_id] = self.env_errors.get(env_id, 0) + 1

    def state(self) -> Dict[str, Any]:
        """The counters a checkpoint keeps (plain JSON data; `restore` reads it back)."""
        self._harvest()
        return {
            "env_steps": int(self.env_steps),
            "episodes": int(self._episodes),
            "recent_returns": [float(r) for r in self.recent_returns],
            "recent_lengths": [int(n) for n in self.recent_lengths],
            "restarts": {k: int(v) for k, v in self.restarts.items()},
            "env_errors": {k: int(v) for k, v in self.env_errors.items()},
            "timeouts": {k: int(v) for k, v in self.timeouts.items()},
        }

    def restore(self, state: Dict[str, Any]) -> None:
        """Take back the counters of `state` (a resumed run continues its episode count and recent returns).

        Raises:
            TypeError: ``state`` is not a dict.
        """
        if not isinstance(state, dict):
            raise TypeError(f"GroupStats.restore: state must be a dict from GroupStats.state(), got {state!r}")
        self._pending.clear()
        self.env_steps = int(state.get("env_steps", 0))
        self._episodes = int(state.get("episodes", 0))
        self.recent_returns.clear()
        self.recent_returns.extend(float(r) for r in state.get("recent_returns", []))
        self.recent_lengths.clear()
        self.recent_lengths.extend(int(n) for n in state.get("recent_lengths", []))
        for key, counts in (("restarts", self.restarts), ("env_errors", self.env_errors), ("timeouts", self.timeouts)):
            for env_id, count in dict(state.get(key) or {}).items():
                counts[str(env_id)] = int(count)

    def steps_per_second(self) -> float:
        """Env steps per second over the recent step calls (0.0 before two calls)."""
        if len(self._marks) < 2:
            return 0.0
        (t0, s0), (t1, s1) = self._marks[0], self._marks[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0

    def snapshot(self) -> Dict[str, Any]:
        """Plain dict of every counter."""
        self._harvest()
        returns = list(self.recent_returns)
        lengths = list(self.recent_lengths)
        return {
            "env_steps": self.env_steps,
            "env_steps_per_s": self.steps_per_second(),
            "episodes": self._episodes,
            "recent_returns": returns,
            "recent_lengths": lengths,
            "recent_agent_returns": {a: list(r) for a, r in self.recent_agent_returns.items()},
            "env_agent_return_mean": {
                e: {a: mean_or_none(list(r)) for a, r in per.items()} for e, per in self.env_agent_returns.items()
            },
            "mean_return": mean_or_none(returns),
            "mean_length": mean_or_none(lengths),
            "restarts": dict(self.restarts),
            "total_restarts": int(sum(self.restarts.values())),
            "env_errors": dict(self.env_errors),
            "total_env_errors": int(sum(self.env_errors.values())),
            "timeouts": dict(self.timeouts),
            "total_timeouts": int(sum(self.timeouts.values())),
        }


def mean_or_none(values: List[float]) -> Optional[float]:
    """Mean of ``values``, or None when empty."""
    return float(np.mean(values)) if values else None
