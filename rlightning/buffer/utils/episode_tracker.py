"""Episodes in progress of one vectorised env worker, kept as a step record.

Every step of the worker (one EnvRet and its PolicyResponse for all
``num_envs`` sub-environments) is one row of a growing record
``[T, num_envs, ...]``; each sub-environment (row ``i``) has the index of the
step its episode in progress started at. No per-row Python objects are kept
per step: a step is a handful of slice writes.

Alignment (gymnasium NEXT_STEP autoreset): the EnvRet of step ``t`` carries
the reward and done flags of the action of step ``t - 1``. When row ``i`` of
that EnvRet is done, the episode of row ``i`` is the steps
``start[i] .. t - 1``, its last ``next_obs`` is the (final) observation of step
``t``, and the value the policy computed for that final observation is the
episode's bootstrap value. The step-``t`` action of row ``i`` is ignored by
the env, so row ``i``'s next episode starts at step ``t + 1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

__all__ = ["EpisodeTracker", "FinishedEpisodes"]

_FLAG_KEYS = ("reward", "terminated", "truncated")


@dataclass
class FinishedEpisodes:
    """Episodes of one env worker that were closed in one step, concatenated.

    Attributes:
        env_id: The env worker.
        data: Transition arrays ``[sum(lengths), ...]``: ``obs``, ``action``, extras,
            ``reward``, ``next_obs``, ``terminated``, ``truncated``, ``done``.
        lengths: ``[E]`` transitions per episode, in the order of ``data``.
        rows: ``[E]`` sub-environment of each episode.
        bootstrap_value: ``[E]`` value of the observation after each episode's last
            step (None when the responses carry no ``value``).
    """

    env_id: str
    data: Dict[str, np.ndarray]
    lengths: np.ndarray
    rows: np.ndarray
    bootstrap_value: Optional[np.ndarray] = None

    @property
    def num_transitions(self) -> int:
        """Transitions in all the episodes."""
        return int(self.lengths.sum())

    @property
    def num_episodes(self) -> int:
        """Number of episodes."""
        return int(self.lengths.shape[0])


class EpisodeTracker:
    """The episodes in progress of one vectorised env worker.

    Args:
        env_id: The env worker's id.
        num_envs: Its number of sub-environments.
        initial_steps: Steps the record holds before it first grows.
    """

    def __init__(self, env_id: str, num_envs: int, initial_steps: int = 32) -> None:
        if num_envs < 1:
            raise ValueError(f"env {env_id!r}: num_envs must be at least 1, got {num_envs}")
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self._alloc = max(4, int(initial_steps))
        self.record: Optional[Dict[str, np.ndarray]] = None
        self._flat: Dict[str, np.ndarray] = {}
        self.t = 0
        self.base = 0
        self.start = np.zeros(self.num_envs, dtype=np.int64)
        # Per-row running totals of the env's own episodes (for stats).
        self._ret = np.zeros(self.num_envs, dtype=np.float64)
        self._len = np.zeros(self.num_envs, dtype=np.int64)
        self._fresh = np.ones(self.num_envs, dtype=bool)

    # ------------------------------------------------------------------ queries

    @property
    def pending_transitions(self) -> int:
        """Recorded steps that belong to episodes in progress (the last one's reward may be unknown)."""
        return int(np.maximum(self.t - self.start, 0).sum())

    def finishing(self, done: np.ndarray, drop: Optional[np.ndarray] = None) -> Tuple[int, int]:
        """(transitions, episodes) a push with these done flags would close (for capacity checks)."""
        fin = done & (self.start <= self.t - 1)
        if drop is not None:
            fin &= ~drop
        return int((self.t - self.start[fin]).sum()), int(fin.sum())

    def truncating(self) -> Tuple[int, int]:
        """(transitions, episodes) `truncate` would close."""
        rows = self.start <= self.t - 2
        return int((self.t - 1 - self.start[rows]).sum()), int(rows.sum())

    # ------------------------------------------------------------------ record

    def _allocate(self, step: Dict[str, np.ndarray]) -> None:
        self.record = {k: np.zeros((self._alloc, self.num_envs) + v.shape[1:], dtype=v.dtype) for k, v in step.items()}
        self._set_flat()

    def _set_flat(self) -> None:
        """Views of the record as ``[steps * num_envs, ...]`` (gathers index them with one flat index)."""
        self._flat = {k: arr.reshape((-1,) + arr.shape[2:]) for k, arr in self.record.items()}

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_flat"] = {}  # views: pickling would copy them apart from the record
        return state

    def __setstate__(self, state: Dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self.record is not None:
            self._set_flat()

    def _ensure_slot(self, t: int) -> None:
        if t - self.base < self._alloc:
            return
        keep_from = max(self.base, min(int(self.start.min()), t - 1))
        keep = t - keep_from
        shift = keep_from - self.base
        if keep + 1 <= self._alloc // 2:
            for arr in self.record.values():
                arr[:keep] = arr[shift : shift + keep]
        else:
            new_alloc = max(2 * self._alloc, 2 * (keep + 1))
            for k, arr in self.record.items():
                grown = np.zeros((new_alloc,) + arr.shape[1:], dtype=arr.dtype)
                grown[:keep] = arr[shift : shift + keep]
                self.record[k] = grown
            self._alloc = new_alloc
            self._set_flat()
        self.base = keep_from

    def _gather(self, rows: np.ndarray, end: int) -> FinishedEpisodes:
        """Episodes of ``rows``: steps ``start[row] .. end - 1``, next observations from step ``end``."""
        rec = self.record
        n_envs = self.num_envs
        starts = self.start[rows]
        lengths = (end - starts).astype(np.int64)
        # Flat indices into the record viewed as [steps * num_envs, ...]: step t of row r is t * num_envs + r.
        first = (starts - self.base) * n_envs + rows
        if rows.shape[0] == 1:
            fi = np.arange(int(first[0]), int(first[0]) + int(lengths[0]) * n_envs, n_envs, dtype=np.int64)
        else:
            total = int(lengths.sum())
            offsets = np.repeat(np.cumsum(lengths) - lengths, lengths)
            fi = np.repeat(first, lengths) + (np.arange(total, dtype=np.int64) - offsets) * n_envs
        flat = self._flat
        data: Dict[str, np.ndarray] = {"obs": flat["obs"].take(fi, axis=0)}
        for k, arr in flat.items():
            if k not in data and k not in _FLAG_KEYS:
                data[k] = arr.take(fi, axis=0)
        data["reward"] = flat["reward"].take(fi, axis=0)
        data["next_obs"] = flat["obs"].take(fi + n_envs, axis=0)
        data["terminated"] = flat["terminated"].take(fi, axis=0)
        data["truncated"] = flat["truncated"].take(fi, axis=0)
        data["done"] = data["terminated"] | data["truncated"]
        boot = None
        if "value" in rec:
            boot = rec["value"][end - self.base, rows].reshape(rows.shape[0], -1)[:, 0].astype(np.float32)
        return FinishedEpisodes(self.env_id, data, lengths, rows.astype(np.int64), boot)

    # ------------------------------------------------------------------ updates

    def push(
        self, step: Dict[str, np.ndarray], drop: Optional[np.ndarray] = None, close_on_done: bool = True
    ) -> Optional[FinishedEpisodes]:
        """Record one step and close the episodes it ends.

        Args:
            step: The step dict (``obs``, ``reward``, ``terminated``, ``truncated``,
                ``action``, extras), each ``[num_envs, ...]``, already validated.
            drop: ``[num_envs]`` rows whose episode in progress is discarded (with this step).
            close_on_done: Close episodes on done flags (False: flags are stored,
                episodes only end by `truncate`).

        Returns:
            The closed episodes, or None when none closed.
        """
        if self.record is None:
            self._allocate(step)
        t = self.t
        self._ensure_slot(t)
        rec = self.record
        slot = t - self.base
        if t >= 1:
            for k in _FLAG_KEYS:
                rec[k][slot - 1] = step[k]
        for k, v in step.items():
            if k not in _FLAG_KEYS:
                rec[k][slot] = v
        done = step["terminated"] | step["truncated"]
        if not close_on_done:
            done = np.zeros_like(done)
        finishing = done & (self.start <= t - 1)
        if drop is not None:
            finishing &= ~drop
            done = done | drop
        finished = self._gather(np.flatnonzero(finishing), t) if finishing.any() else None
        self.start[done] = t + 1
        self.t = t + 1
        return finished

    def truncate(self) -> Optional[FinishedEpisodes]:
        """Close every episode in progress by hand (contract 4).

        The last recorded step (its reward is not known yet) is dropped; its
        observation becomes the last ``next_obs`` and its value the bootstrap
        value; the last kept transition is marked truncated. The next step
        starts new episodes in every row.
        """
        finished = None
        if self.record is not None:
            rows = np.flatnonzero(self.start <= self.t - 2)
            if rows.size:
                finished = self._gather(rows, self.t - 1)
                ends = np.cumsum(finished.lengths) - 1
                finished.data["truncated"][ends] |= ~finished.data["terminated"][ends]
                finished.data["done"][ends] = True
        self.start[:] = self.t
        return finished

    def update_env_stats(
        self, reward: np.ndarray, done: np.ndarray, info: Optional[Dict[str, Any]] = None
    ) -> List[Tuple[int, float, int]]:
        """Track the env's own episode returns and lengths; return (row, return, length) of episodes that ended.

        Uses ``info["episode_return"]`` / ``info["episode_length"]`` when the env
        reports them, else running sums of the (raw) rewards.
        """
        live = ~self._fresh
        np.add(self._ret, reward, out=self._ret, where=live)
        np.add(self._len, 1, out=self._len, where=live)
        out: List[Tuple[int, float, int]] = []
        if done.any():
            ret = self._ret
            length = self._len
            info = info or {}
            if "episode_return" in info and "episode_length" in info:
                try:
                    ret = np.asarray(info["episode_return"], dtype=np.float64).reshape(self.num_envs)
                    length = np.asarray(info["episode_length"], dtype=np.int64).reshape(self.num_envs)
                    live = np.ones(self.num_envs, dtype=bool)
                except (TypeError, ValueError):
                    pass
            for row in np.flatnonzero(done & live):
                out.append((int(row), float(ret[row]), int(length[row])))
            self._ret[done] = 0.0
            self._len[done] = 0
        self._fresh = done.copy()
        return out

    def __repr__(self) -> str:
        return f"EpisodeTracker({self.env_id!r}, num_envs={self.num_envs}, t={self.t})"
