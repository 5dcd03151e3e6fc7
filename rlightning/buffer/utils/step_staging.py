"""`StepStaging`: per-step adds of one env staged in numpy, written when their episodes close.

The seed edge (`Storage.add_transition`, `add_data_async`) gets one env step at
a time. Running the chunk machinery of `OpenEpisodes` on every one-column
record costs some 35-60 small torch ops per step; instead each step's stored
keys are written into one column of preallocated ``[N, cap, ...]`` numpy
arrays (a few slice assignments). The staging holds the env's open episodes
by itself (a per-row open start): when a step closes episodes, the closing
rows' steps are written straight from the staging, planned in numpy
(`plan_closed`), and the other rows' steps stay staged; written leading
columns are dropped when the staging is full, else it doubles (up to
`STAGE_BYTES`). The staged columns become one ``[N, T]`` `Chunk` handed to
the env's `OpenEpisodes` (`chunk`) when the numpy plan does not apply (a
row dropped by the NaN guard, episodes that do not close on done, steps the
open episodes already hold) and when a reader needs them there (truncation,
a record of the same env). What is stored is what the converter
(`rlightning.types.record.record_leaves`, `chunk_from_leaves`) and the chunk
machinery store for those steps.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from rlightning.buffer.utils.open_episodes import Chunk, OpenEpisodes, WritePlan
from rlightning.types.record import NEXT, OBS, REWARD, TERMINATED, TRUNCATED, VALUE, key_tuple
from rlightning.types.stored_names import stored_name

__all__ = ["StepStaging"]

_FLAGS = (REWARD, TERMINATED, TRUNCATED)
_NO_MASK = torch.zeros(0, 0, dtype=torch.bool)
#: Columns of a first allocation; a full staging doubles while it holds under `STAGE_BYTES`, else is written out.
STAGE_STEPS = 64
STAGE_BYTES = 8 << 20


class StepStaging:
    """Staged per-step columns of one env worker's ``n`` sub-envs (numpy, preallocated).

    Args:
        env_id: The env worker.
        n: Its number of sub-envs.
        close_on_done: Done flags close episodes (``auto_truncate_episode``).
        cap: Columns per allocation (the staging is written out when full).
    """

    def __init__(self, env_id: str, n: int, close_on_done: bool, cap: int = STAGE_STEPS) -> None:
        self.env_id = env_id
        self.n = int(n)
        self.close_on_done = bool(close_on_done)
        self.cap = int(cap)
        self.t = 0
        self.data: Dict[str, np.ndarray] = {}
        #: (stored name, key in the step dict, from the next step) per stored key, in the record's key order.
        self.layout: Optional[List[Tuple[str, Any, bool]]] = None
        self.has_value = False
        self.valid = np.zeros((self.n, self.cap), bool)
        self.raw_reward = np.zeros((self.n, self.cap), np.float64)
        #: Column -> ``[N]`` rows the NaN guard drops there.
        self.bad: Dict[int, np.ndarray] = {}
        self.boot: Optional[np.ndarray] = None
        #: Per row, the first column not written yet (the columns before it were stored by `plan_closed`).
        self.open_start = np.zeros(self.n, np.int64)
        self._next_open: Optional[np.ndarray] = None
        self._views: Optional[Tuple[Dict[str, np.ndarray], Dict[str, torch.Tensor]]] = None

    # ------------------------------------------------------------------ layout

    def _set_layout(self, step: Mapping[Any, np.ndarray], next_step: Mapping[Any, np.ndarray]) -> None:
        layout: List[Tuple[str, Any, bool]] = []
        for k in step:
            if k in _FLAGS:
                continue
            name = stored_name(key_tuple(k))
            if name is not None:
                layout.append((name, k, False))
        for k in next_step:
            if key_tuple(k)[0] == OBS:
                layout.append((stored_name((NEXT,) + key_tuple(k)), k, True))
        self.layout = layout
        self.has_value = VALUE in next_step
        self._allocate(step, next_step)

    def _allocate(self, step: Mapping[Any, np.ndarray], next_step: Mapping[Any, np.ndarray]) -> None:
        n, cap = self.n, self.cap
        data = {}
        for name, k, nxt in self.layout:
            v = next_step[k] if nxt else step[k]
            data[name] = np.empty((n, cap) + tuple(v.shape[1:]), dtype=v.dtype)
        data["reward"] = np.empty((n, cap), np.float32)
        data["terminated"] = np.empty((n, cap), bool)
        data["truncated"] = np.empty((n, cap), bool)
        data["done"] = np.empty((n, cap), bool)
        self.data = data
        self.boot = np.empty((n, cap), np.float32) if self.has_value else None

    # ------------------------------------------------------------------ staging

    def put(
        self,
        step: Mapping[Any, np.ndarray],
        next_step: Mapping[Any, np.ndarray],
        raw_reward: np.ndarray,
        drop: Optional[np.ndarray],
    ) -> bool:
        """Write the record of ``step`` (its next step ``next_step``) into column ``t`` (not counted yet).

        Args:
            step: The checked step dict the action was chosen on (observation, action, extras, its flags).
            next_step: The next checked step dict (next observation, reward and flags of the action, value).
            raw_reward: ``[N]`` (or ``[1]``) rewards as the env gave them (for episode stats).
            drop: ``[N]`` rows whose episode the NaN guard drops, or None.

        Returns:
            True when the staged columns must be written out with this one (an episode closes, a row is
            dropped, the staging is full); call `advance` otherwise.
        """
        if self.layout is None:
            self._set_layout(step, next_step)
        t = self.t
        data = self.data
        for name, k, nxt in self.layout:
            data[name][:, t] = next_step[k] if nxt else step[k]
        term = next_step[TERMINATED]
        trunc = next_step[TRUNCATED]
        data["reward"][:, t] = next_step[REWARD]
        data["terminated"][:, t] = term
        data["truncated"][:, t] = trunc
        done = data["done"][:, t]
        np.logical_or(term, trunc, out=done)
        valid = self.valid[:, t]
        np.logical_not(np.logical_or(step[TERMINATED], step[TRUNCATED]), out=valid)
        self.raw_reward[:, t] = raw_reward
        if self.boot is not None:
            self.boot[:, t] = next_step[VALUE].reshape(self.n, -1)[:, 0]
        self.bad.pop(t, None)
        if drop is not None and drop.any():
            self.bad[t] = drop
            return True
        if (done & valid).any():
            return True
        return not self._make_room(t + 1)

    def _make_room(self, cols: int) -> bool:
        """Room for a column after the ``cols`` used ones: compact, else grow (False: write the staging out)."""
        return cols < self.cap or self._compact(cols) or self._grow(cols)

    def _compact(self, t: int) -> bool:
        """Drop the leading columns every row has written (False: there are none)."""
        m = int(self.open_start.min())
        if m == 0:
            return False
        arrays = list(self.data.values()) + [self.valid, self.raw_reward]
        if self.boot is not None:
            arrays.append(self.boot)
        for a in arrays:
            a[:, : t - m] = a[:, m:t].copy()
        self.open_start -= m
        self.t -= m
        return True

    def _grow(self, t: int) -> bool:
        """Double the columns of a full staging while it stays under `STAGE_BYTES` (False: write it out)."""
        row = sum(a[0, 0].nbytes for a in self.data.values()) + 16
        if self.n * self.cap * 2 * row > STAGE_BYTES:
            return False
        cap = self.cap * 2

        def grown(a: np.ndarray) -> np.ndarray:
            out = np.empty_like(a, shape=(self.n, cap) + a.shape[2:])
            out[:, :t] = a[:, :t]
            return out

        self.data = {name: grown(a) for name, a in self.data.items()}
        self.valid, self.raw_reward = grown(self.valid), grown(self.raw_reward)
        if self.boot is not None:
            self.boot = grown(self.boot)
        self.cap = cap
        return True

    def advance(self) -> None:
        """Count the column written by `put`."""
        self.t += 1

    def chunk(self, t: int) -> Tuple[Chunk, Optional[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
        """The first ``t`` columns as a `Chunk` with its bad rows, raw rewards, raw done flags and valid masks.

        The chunk's tensors share memory with the staging where they can (one sub-env, or a full
        staging); call `written` once the writer has taken it.
        """
        n = self.n

        def cols(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(a[:, :t].reshape((n * t,) + a.shape[2:]))

        def mask(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a[:, :t]))

        data = {name: cols(a) for name, a in self.data.items()}
        valid = mask(self.valid)
        raw_done = mask(self.data["done"])
        if self.open_start.any():  # columns already written by `plan_closed` are no step of this chunk
            live = torch.from_numpy(np.arange(t)[None, :] >= self.open_start[:, None])
            valid, raw_done = valid & live, raw_done & live
        if self.close_on_done:
            kept = valid.clone()
            done = raw_done & valid
        else:
            kept = torch.ones(n, t, dtype=torch.bool)
            done = torch.zeros(n, t, dtype=torch.bool)
        boot = None if self.boot is None else mask(self.boot)
        bad = None
        if any(c < t for c in self.bad):
            bad = torch.zeros(n, t, dtype=torch.bool)
            for c, rows in self.bad.items():
                if c < t:
                    bad[:, c] = torch.from_numpy(rows)
        chunk = Chunk(data, n, t, kept, done, boot)
        return chunk, bad, mask(self.raw_reward), raw_done.clone(), valid.clone()

    def plan_closed(self, t: int, state: Optional[OpenEpisodes]) -> Optional[WritePlan]:
        """The write plan of the episodes that close at column ``t - 1``, or None (hand over with `chunk`).

        Applies while the staging holds the env's open episodes by itself: ``state`` holds no step and
        drops no row, no row is dropped here, done flags close episodes, and no episode closes before
        column ``t - 1`` (every close is written when it is staged). The closing rows' staged steps are
        written, in row-major order (each row's episode by time), straight from the staging; the other
        rows' steps stay staged (`closed` moves the closing rows' open starts past theirs). Planned in
        numpy on the closing rows only: a handful of array ops instead of the chunk machinery's torch ops.
        """
        if not self.close_on_done or t == 0 or any(c < t for c in self.bad):
            return None
        if state is not None and (state.n != self.n or state.chunks or bool(state.dropping.any())):
            return None
        n, cap = self.n, self.cap
        last = t - 1
        rows = np.flatnonzero(self.data["done"][:, last] & self.valid[:, last] & (self.open_start <= last))
        steps = self.valid[rows, :t] & (np.arange(t)[None, :] >= self.open_start[rows, None])
        if (self.data["done"][rows, :last] & steps[:, :last]).any():
            return None  # an earlier close was not written: the chunk machinery sorts it out
        rr, cc = np.nonzero(steps)
        flat = rows[rr] * cap + cc
        count = flat.shape[0]
        lengths = steps.sum(1).astype(np.int64)
        nxt = self.open_start.copy()
        nxt[rows] = t
        self._next_open = nxt
        t0 = state.t if state is not None else 0
        chunk = Chunk(self._flat_views(), n, t, _NO_MASK, _NO_MASK, None, t0, cap)  # written, never held
        boot = None if self.boot is None else torch.from_numpy(self.boot[rows, last])
        ret = torch.zeros(n, dtype=torch.float64) if state is None else state.ret
        length = torch.zeros(n, dtype=torch.int64) if state is None else state.len
        stats: List[Tuple[int, float, int]] = []
        if rows.size:
            returns = np.where(steps, self.raw_reward[rows, :t], 0.0).sum(1) + ret.numpy()[rows]
            lens = lengths + length.numpy()[rows]
            stats = list(zip(rows.tolist(), returns.tolist(), lens.tolist()))[-100:]
            ret, length = ret.clone(), length.clone()
            ret[rows] = 0.0
            length[rows] = 0
        plan = WritePlan(
            [(chunk, torch.from_numpy(flat))] if count else [],
            int(count),
            torch.arange(int(count)),
            lengths,
            boot,
            torch.full((n,), t0 + t, dtype=torch.int64),  # the open steps are the staging's, not the state's
            torch.zeros(n, dtype=torch.bool),
            chunk=chunk,
        )
        plan.stats, plan.acc, plan.ordered = stats, (ret, length), True
        return plan

    def _flat_views(self) -> Dict[str, torch.Tensor]:
        """The staging arrays as ``[N * cap, ...]`` tensors (made once per allocation)."""
        views = self._views
        if views is None or views[0] is not self.data:
            flat = {
                name: torch.from_numpy(a.reshape((self.n * self.cap,) + a.shape[2:])) for name, a in self.data.items()
            }
            views = self._views = (self.data, flat)
        return views[1]

    def closed(self, t: int) -> bool:
        """The plan of `plan_closed` over ``t`` columns was written: count them, move the rows' open starts.

        Returns:
            False when a full staging has no room left (hand it over to the open episodes).
        """
        self.t = t
        self.open_start = self._next_open
        self._next_open = None
        if int(self.open_start.min()) >= t:  # every staged step is stored: start again at column 0
            self.t = 0
            self.open_start[:] = 0
            self.bad.clear()
        return self._make_room(self.t)

    def pending_steps(self, dropping: Optional[torch.Tensor]) -> int:
        """Staged steps of open episodes (rows not ``dropping``)."""
        t = self.t
        kept = np.arange(t)[None, :] >= self.open_start[:, None]
        if self.close_on_done:
            kept &= self.valid[:, :t]
        if dropping is not None:
            kept &= ~dropping.numpy()[:, None]
        return int(kept.sum())

    def written(self, t: int, shared: bool = True) -> None:
        """The first ``t`` columns were written out: start again (new arrays where the writer may hold them).

        Args:
            t: Columns written.
            shared: The writer may hold views of the staging (a chunk from `chunk`, not `plan_closed`).
        """
        if shared and self.layout is not None and (self.n == 1 or t >= self.cap):
            shapes = {name: a[:, :1] for name, a in self.data.items()}
            self.data = {name: np.empty_like(a, shape=(self.n, self.cap) + a.shape[2:]) for name, a in shapes.items()}
            if self.boot is not None:
                self.boot = np.empty_like(self.boot)
        self.t = 0
        self.open_start[:] = 0
        self.bad.clear()

    @property
    def pending(self) -> int:
        """Staged columns."""
        return self.t

    def __repr__(self) -> str:
        return f"StepStaging({self.env_id!r}, n={self.n}, staged={self.t}, cap={self.cap})"
