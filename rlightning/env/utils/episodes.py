"""Per-episode return and length, kept by the env worker with vectorised numpy.

Under gymnasium's NEXT_STEP autoreset a sub-env that reported done returns,
on the following step, its reset observation with reward 0 and done False.
`EpisodeTracker.update` knows which rows were done on the previous step and
starts their counters again, so ``episode_return`` / ``episode_length`` are
the running totals including the last reward, and on a done row they are that
episode's final values (contract 1).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np


def done_mask(terminated: Any, truncated: Any) -> np.ndarray:
    """Row-wise done flags of an `EnvRet`; for multi-agent dicts a row is done when every agent is."""
    if isinstance(terminated, dict):
        agents = list(terminated)
        if not agents:
            return np.zeros(0, dtype=bool)
        rows = [np.logical_or(terminated[a], truncated.get(a, False)) for a in agents]
        return np.logical_and.reduce(np.asarray(rows, dtype=bool), axis=0)
    return np.logical_or(terminated, truncated)


class EpisodeTracker:
    """Running episode returns and lengths of ``num_envs`` sub-environments.

    Args:
        num_envs: Number of sub-environments (rows).
    """

    def __init__(self, num_envs: int) -> None:
        self.num_envs = int(num_envs)
        self._return = np.zeros(self.num_envs, dtype=np.float64)
        self._length = np.zeros(self.num_envs, dtype=np.int64)
        self._prev_done: Optional[np.ndarray] = None  # done mask of the previous step, if any row was done
        self.episodes = 0
        self.steps = 0

    def reset(self) -> Tuple[np.ndarray, np.ndarray]:
        """Start every row again (after an env reset); returns the zero totals."""
        self._return = np.zeros(self.num_envs, dtype=np.float64)
        self._length = np.zeros(self.num_envs, dtype=np.int64)
        self._prev_done = None
        return self._return, self._length

    def update(self, reward: np.ndarray, done: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """Account one vector step.

        Args:
            reward: float rewards ``[num_envs]``.
            done: terminated | truncated ``[num_envs]``.

        Returns:
            (episode_return, episode_length): the running totals, fresh arrays never written again; on a
            done row they are that episode's final values.
        """
        self.steps += self.num_envs
        ret = self._return + reward
        length = self._length + 1
        prev = self._prev_done
        if prev is not None:
            # Rows done on the previous step were reset on this one (NEXT_STEP autoreset).
            ret[prev] = 0.0
            length[prev] = 0
        self._return = ret
        self._length = length
        finished = np.count_nonzero(done)
        if finished:
            self._prev_done = done
            self.episodes += finished
        else:
            self._prev_done = None
        return ret, length

    def summary(self) -> Dict[str, Any]:
        """Plain counters: env steps and finished episodes."""
        return {"env_steps": self.steps, "episodes": self.episodes}


def episode_report(env_ret: Any, done: Optional[np.ndarray] = None) -> Tuple[List[float], List[int]]:
    """Final (returns, lengths) of the episodes an `EnvRet` closes (its done rows); empty lists if none.

    ``done``: its done flags when the caller has them (a bool array ``[N]``); computed here otherwise.
    """
    if done is None:
        done = done_mask(env_ret.last_terminated, env_ret.last_truncated)
        if not np.any(done):
            return [], []
    info = env_ret.info
    if type(info) is not dict:
        return [], []
    ret = info.get("episode_return")
    length = info.get("episode_length")
    if ret is None or length is None:
        return [], []
    if type(done) is not np.ndarray or done.dtype != bool or done.ndim != 1:
        done = np.asarray(done, dtype=bool).reshape(-1)
    if type(ret) is not np.ndarray or ret.ndim != 1:
        ret = np.asarray(ret).reshape(-1)
    if type(length) is not np.ndarray or length.ndim != 1:
        length = np.asarray(length).reshape(-1)
    return ret[done].tolist(), length[done].tolist()


class EpisodeIds:
    """Episode ids of ``num_envs`` rows: one int64 counter per env worker, so an id is unique within it.

    `reset` gives every row a new id (the first: ``base + i`` for row ``i``); every time a row starts a new
    episode it takes the next value of the counter. A row starts a new episode on the autoreset step of
    the NEXT_STEP convention (the step whose ``valid`` is False: its ``next.obs`` is the reset
    observation), so every valid step of an episode carries the same id. Ids of one block are handed
    out in time-major order (step, then row).

    Args:
        num_envs: Rows.
        base: First id (a relaunched worker starts past the ids its predecessor may have used).
    """

    def __init__(self, num_envs: int, base: int = 0) -> None:
        self.num_envs = int(num_envs)
        self._next = int(base)
        self.current = np.full(self.num_envs, -1, dtype=np.int64)

    def _take(self, n: int) -> np.ndarray:
        ids = np.arange(self._next, self._next + n, dtype=np.int64)
        self._next += n
        return ids

    def reset(self) -> np.ndarray:
        """Every row starts a new episode (an env reset); returns the rows' new ids."""
        self.current = self._take(self.num_envs)
        return self.current

    def assign(self, valid: np.ndarray) -> np.ndarray:
        """Ids ``[num_envs, T]`` of a block of steps whose ``valid`` flags are ``[num_envs, T]``.

        Raises:
            ValueError: ``valid`` is not ``[num_envs, T]``.
        """
        valid = np.asarray(valid, dtype=bool)
        if valid.ndim != 2 or valid.shape[0] != self.num_envs:
            raise ValueError(f"valid must be [num_envs={self.num_envs}, T], got shape {valid.shape}")
        starts = ~valid
        if not starts.any():
            return np.repeat(self.current[:, None], valid.shape[1], axis=1)
        steps, rows = np.nonzero(starts.T)  # time-major order
        new = np.full(valid.shape, -1, dtype=np.int64)
        new[rows, steps] = self._take(len(rows))
        t = np.arange(valid.shape[1])
        last = np.maximum.accumulate(np.where(starts, t, -1), axis=1)  # latest start at or before each step
        started = new[np.arange(self.num_envs)[:, None], np.maximum(last, 0)]
        ids = np.where(last >= 0, started, self.current[:, None])
        self.current = ids[:, -1].copy()
        return ids
