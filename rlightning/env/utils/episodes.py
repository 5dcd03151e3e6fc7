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


def episode_report(env_ret: Any) -> Tuple[List[float], List[int]]:
    """Final (returns, lengths) of the episodes an `EnvRet` closes (its done rows); empty lists if none."""
    done = done_mask(env_ret.last_terminated, env_ret.last_truncated)
    if not np.any(done):
        return [], []
    info = env_ret.info if isinstance(env_ret.info, dict) else {}
    ret = info.get("episode_return")
    length = info.get("episode_length")
    if ret is None or length is None:
        return [], []
    done = np.asarray(done, dtype=bool).reshape(-1)
    return np.asarray(ret).reshape(-1)[done].tolist(), np.asarray(length).reshape(-1)[done].tolist()
