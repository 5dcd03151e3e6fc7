"""`StorageWriter`: closed episodes of record chunks written into a storage's preallocated tensors.

Every add hands the writer one chunk ``[N, T]`` of one env. Its
`OpenEpisodes` finds, with tensor ops, which steps close episodes; the writer
stores them:

- **direct path** (transition unit, ring allocated, a built-in or
  ``reads``/``writes``-declaring post-process): each source chunk's steps are
  gathered straight into the ring's slices (``index_select(out=...)``): one
  copy per key. A post-process such as GAE runs on the few keys it reads and
  its outputs are written to the same slots.
- **gathered path** (episode unit, the first write, custom post-processes,
  writes larger than the capacity): the episodes are gathered into one
  contiguous batch, post-processed and written (one more copy).

Per-step adds (the seed edge) become columns (`step_columns`) of the same open
episodes: an env's columns wait, in numpy, until a step ends an episode of some
row (or ``STAGE_STEPS`` have come, or something reads the open episodes), then
go in as one ``[N, k]`` chunk (`columns_chunk`). A waiting column closes no
episode, so what is stored, and when, is what one chunk per step would store;
a chunk per step cost about 5x as much per add (torch ops on ``[N, 1]``).

Invalid steps are never stored; a standard-mode storage that has no room
raises `StorageFullError` before anything changes.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from typing import Callable, Dict, List, Optional, Tuple, Union

import numpy as np
import torch

from rlightning.buffer.utils.open_episodes import Chunk, OpenEpisodes, WritePlan
from rlightning.buffer.utils.step_chunk import StepColumns, columns_chunk, step_columns
from rlightning.buffer.utils.tensor_store import EpisodeStore, TransitionStore
from rlightning.buffer.utils.timing import OpTimer
from rlightning.buffer.utils.utils import default_postprocess_fn, run_postprocess

__all__ = ["STAGE_STEPS", "StorageWriter", "StorageFullError"]

#: Per-step columns of one env that wait before they go in as one chunk (below `HOLD_STEPS`: copied into the
#: open-episode tail, not held).
STAGE_STEPS = 15


class StorageFullError(ValueError):
    """A standard-mode storage has no room for the data; nothing was written."""


def _direct_fn(fn: Callable) -> bool:
    """True for post-processes that can run on the keys they read (default, GAE, declared ones)."""
    if fn is default_postprocess_fn:
        return True
    return all(hasattr(fn, a) for a in ("batched", "reads", "writes"))


class StorageWriter:
    """Writes closed episodes into a `TransitionStore` or `EpisodeStore` and keeps the write counters.

    Args:
        store: The preallocated store.
        unit: ``transition`` or ``episode``.
        mode: ``circular`` or ``standard``.
        postprocess_fn: Applied to closed episodes before they are stored.
        on_write: Called with the slots written (the prioritized sampler's hook), or None.
        timer: Timings of the writes.
    """

    def __init__(
        self,
        store: Union[TransitionStore, EpisodeStore],
        unit: str,
        mode: str,
        postprocess_fn: Callable,
        on_write: Optional[Callable[[torch.Tensor], None]],
        timer: OpTimer,
    ) -> None:
        self.store = store
        self.unit = unit
        self.mode = mode
        self.capacity = store.capacity
        self.postprocess_fn = postprocess_fn
        self.on_write = on_write
        self.timer = timer
        self.open: Dict[str, OpenEpisodes] = {}
        #: Per-step columns of each env that closed no episode yet, and their close_on_done (see `write_step`).
        self._staged: Dict[str, Tuple[List[StepColumns], bool]] = {}
        self.lifetime_transitions = 0
        self.ep_starts: deque = deque()
        self.rate: deque = deque(maxlen=64)
        self.recent: deque = deque(maxlen=100)
        #: Set to False to write everything through the gathered path (tests compare the two).
        self.direct = True
        #: Copies of each stored row the last direct write made (1: straight from the record; 2: gather + scatter).
        self.copies_per_row = 0
        #: Rows written so far by the number of copies made on the way from the record (or tail) into the store
        #: (the gathered path, first writes and add_episode included as 2).
        self.rows_by_copies: Counter = Counter()

    # ------------------------------------------------------------------ room

    def check_room(self, transitions: int, episodes: int, what: str) -> None:
        """Raise `StorageFullError` when a standard-mode storage cannot take this much."""
        if self.mode != "standard":
            return
        need = transitions if self.unit == "transition" else episodes
        size = self.store.size
        if need and size + need > self.capacity:
            raise StorageFullError(
                f"standard-mode storage is full: capacity {self.capacity} {self.unit}s, size {size}, "
                f"{what} needs {need} more; nothing was stored (sample and clear it, or use mode='circular')"
            )

    # ------------------------------------------------------------------ records

    def open_episodes(self, env_id: str, n: int) -> OpenEpisodes:
        """The env's open episodes (created on first use), with its waiting per-step columns in."""
        if env_id in self._staged:
            self._flush(env_id)
        state = self.open.get(env_id)
        if state is None:
            state = OpenEpisodes(env_id, n)
        return state

    def write_chunk(
        self,
        env_id: str,
        chunk: Chunk,
        bad: Optional[torch.Tensor],
        raw_reward: torch.Tensor,
        raw_done: torch.Tensor,
        valid: torch.Tensor,
        what: str,
    ) -> None:
        """Hold a chunk and store the episodes it closes (nothing changes when it raises)."""
        self._write_chunk(env_id, chunk, bad, raw_reward, raw_done, valid, what)

    def write_step(
        self,
        env_id: str,
        n: int,
        step: Dict[str, np.ndarray],
        next_step: Dict[str, np.ndarray],
        raw_reward: np.ndarray,
        drop: Optional[np.ndarray],
        close_on_done: bool,
        what: str,
    ) -> None:
        """Write the ``[N]`` record of one seed-edge step (``step`` paired with ``next_step``): its columns wait
        with the env's earlier ones until a step ends an episode (or `STAGE_STEPS` wait), then they go in as one
        chunk (nothing changes when it raises: the step is not kept, the waiting ones are). An env's steps share
        their keys, per-row shapes, dtypes and rows (the storage's step checks hold every step to the first) and
        ``close_on_done`` (the storage's ``auto_truncate_episode``)."""
        cols = step_columns(n, step, next_step, raw_reward, drop)
        waiting = self._staged.get(env_id)
        if waiting is None:
            waiting = self._staged[env_id] = ([], close_on_done)
        waiting[0].append(cols)
        if cols.ends or len(waiting[0]) >= STAGE_STEPS:
            try:
                self._flush(env_id, what)
            except Exception:
                waiting[0].pop()
                if not waiting[0]:
                    del self._staged[env_id]
                raise

    def _flush(self, env_id: str, what: str = "add_transition") -> None:
        """The env's waiting columns in as one chunk (they wait on when it raises)."""
        cols, close_on_done = self._staged.pop(env_id)
        n = cols[0].reward.shape[0]
        try:
            self._write_chunk(env_id, *columns_chunk(n, cols, close_on_done), what)
        except Exception:
            self._staged[env_id] = (cols, close_on_done)
            raise

    def flush_all(self) -> None:
        """Every env's waiting per-step columns in (before the open episodes are read or changed)."""
        for env_id in list(self._staged):
            self._flush(env_id)

    def _write_chunk(
        self,
        env_id: str,
        chunk: Chunk,
        bad: Optional[torch.Tensor],
        raw_reward: torch.Tensor,
        raw_done: torch.Tensor,
        valid: torch.Tensor,
        what: str,
    ) -> None:
        state = self.open_episodes(env_id, chunk.n)
        self._apply(env_id, state, state.plan_chunk(chunk, bad, raw_reward, raw_done, valid), what)

    def _apply(self, env_id: str, state: OpenEpisodes, plan: WritePlan, what: str) -> None:
        """Check room, write a plan's episodes, commit it (nothing changes when it raises)."""
        self.check_room(plan.n, plan.num_episodes, what)
        self._write_plan(env_id, plan)
        self.open[env_id] = state
        state.commit(plan)
        now = time.time()
        for row, ret, length in plan.stats:
            self.recent.append({"env_id": f"{env_id}/{row}", "return": ret, "length": length, "time": now})

    def truncating(self, env_ids: List[str]) -> List[WritePlan]:
        """Plans closing every open episode of these envs (for the capacity check)."""
        self.flush_all()
        return [self.open[e].plan_truncate() for e in env_ids if e in self.open]

    def truncate(self, env_ids: List[str], what: str = "truncate_episodes") -> None:
        """Close every open episode of these envs by hand and store them (the last step of each is truncated)."""
        self.flush_all()
        ids = [e for e in dict.fromkeys(env_ids) if e in self.open]
        plans = [self.open[e].plan_truncate() for e in ids]
        self.check_room(sum(p.n for p in plans), sum(p.num_episodes for p in plans), what)
        for env_id, plan in zip(ids, plans):
            self._write_plan(env_id, plan)
            self.open[env_id].commit(plan)

    def pending_transitions(self) -> int:
        """Steps of every open episode."""
        self.flush_all()
        return sum(s.pending_transitions for s in self.open.values())

    # ------------------------------------------------------------------ writing

    def _direct_ok(self, plan: WritePlan) -> bool:
        if not self.direct or self.unit != "transition" or plan.n > self.capacity:
            return False
        ring = self.store.ring
        if not ring.allocated or not _direct_fn(self.postprocess_fn):
            return False
        writes = () if self.postprocess_fn is default_postprocess_fn else tuple(self.postprocess_fn.writes)
        data = plan.sources[0][0].data
        if set(data) | set(writes) != set(ring.spec):
            return False
        return all((v.shape[1:], v.dtype) == ring.spec[k] for k, v in data.items())

    def _write_plan(self, env_id: str, plan: WritePlan) -> None:
        if plan.n == 0:
            return
        if self._direct_ok(plan):
            self._write_direct(plan)
            return
        t0 = time.perf_counter()
        keys = list(plan.sources[0][0].data)
        data = {k: plan.gather(k).index_select(0, plan.perm) for k in keys}
        if plan.forced_ends is not None and plan.forced_ends.numel() and "truncated" in data:
            ends = plan.forced_ends
            data["truncated"][ends] = ~data["terminated"][ends] if "terminated" in data else True
            if "done" in data:
                data["done"][ends] = True
        self.timer.add("gather", time.perf_counter() - t0)
        self.rows_by_copies[2] += plan.n
        self.write_episodes(env_id, data, plan.lengths, None if plan.boot is None else plan.boot.numpy())

    def _write_direct(self, plan: WritePlan) -> None:
        t0 = time.perf_counter()
        store = self.store
        ring = store.ring
        pos = store.claim(plan.n)
        # Episode order in the ring (each episode contiguous): write step j of the plan to slots_e[inv[j]].
        slots_e = (torch.arange(plan.n) + pos) % self.capacity
        if plan.ordered:
            dst = slots_e
        else:
            dst = torch.empty(plan.n, dtype=torch.int64)
            dst[plan.perm] = slots_e
        offset = 0
        copies = 0
        for chunk, idx in plan.sources:
            k = idx.numel()
            made = max(ring.copy_rows_to(keys, rows, dst[offset : offset + k]) for keys, rows in chunk.groups(idx))
            self.rows_by_copies[made] += k
            copies = max(copies, made)
            offset += k
        self.copies_per_row = copies
        slots = slots_e
        if plan.forced_ends is not None and plan.forced_ends.numel():
            ends = slots_e.index_select(0, plan.forced_ends).to(ring.device)
            if "truncated" in ring.data:
                term = ring.data["terminated"].index_select(0, ends) if "terminated" in ring.data else None
                ring.data["truncated"][ends] = ~term if term is not None else True
            if "done" in ring.data:
                ring.data["done"][ends] = True
        fn = self.postprocess_fn
        if fn is not default_postprocess_fn:
            t1 = time.perf_counter()
            reads = {k: ring.data[k].index_select(0, slots_e.to(ring.device)) for k in fn.reads if k in ring.data}
            boot = plan.boot
            out = run_postprocess(fn, reads, plan.lengths, None if boot is None else boot.numpy())
            for k in fn.writes:
                ring.data[k].index_copy_(0, slots_e.to(ring.device), out[k].to(ring.data[k].dtype))
            self.timer.add("postprocess", time.perf_counter() - t1)
        if self.on_write is not None:
            self.on_write(slots)
        starts = self.lifetime_transitions + np.cumsum(plan.lengths) - plan.lengths
        self.ep_starts.extend(starts.tolist())
        self.lifetime_transitions += plan.n
        now = time.perf_counter()
        self.rate.append((now, self.lifetime_transitions))
        self.timer.add("write", now - t0)

    def write_episodes(
        self, env_id: str, data: Dict[str, torch.Tensor], lengths: np.ndarray, boot: Optional[np.ndarray]
    ) -> None:
        """Post-process and store whole episodes concatenated in ``data`` (checked against the stored layout)."""
        if self.postprocess_fn is not default_postprocess_fn:
            t0 = time.perf_counter()
            data = run_postprocess(self.postprocess_fn, data, lengths, boot)
            self.timer.add("postprocess", time.perf_counter() - t0)
        self.store.ring.check(data, f"env {env_id!r}")
        self.write(data, int(np.sum(lengths)), lengths)

    def write(self, batch: Dict[str, torch.Tensor], n: int, lengths: Optional[np.ndarray], op: str = "write") -> None:
        """Write ``n`` checked rows (``lengths``: the episodes they form, or None for loose transitions)."""
        if n == 0:
            return
        t0 = time.perf_counter()
        store = self.store
        if self.unit == "transition":
            pos = store.write(batch, n)
            if self.on_write is not None:
                self.on_write((torch.arange(min(n, self.capacity)) + pos) % self.capacity)
            if lengths is not None:
                starts = self.lifetime_transitions + np.cumsum(lengths) - lengths
                self.ep_starts.extend(starts.tolist())
        else:
            slots = store.write(batch, lengths)
            if self.on_write is not None:
                self.on_write(slots)
        self.lifetime_transitions += n
        now = time.perf_counter()
        self.rate.append((now, self.lifetime_transitions))
        self.timer.add(op, now - t0)

    # ------------------------------------------------------------------ counters

    def num_episodes(self) -> int:
        """Whole episodes stored (with ``unit="transition"``: episodes none of whose steps was overwritten)."""
        if self.unit == "episode":
            return self.store.size
        oldest = self.lifetime_transitions - self.store.size
        while self.ep_starts and self.ep_starts[0] < oldest:
            self.ep_starts.popleft()
        return len(self.ep_starts)

    def adds_per_sec(self, window_s: float = 10.0) -> float:
        """Transitions written per second over the last ``window_s`` seconds of writes."""
        if len(self.rate) < 2:
            return 0.0
        t_last, n_last = self.rate[-1]
        t_first, n_first = self.rate[0]
        for t, n in self.rate:
            if t_last - t <= window_s:
                t_first, n_first = t, n
                break
        dt = t_last - t_first
        return (n_last - n_first) / dt if dt > 0 else 0.0

    def clear(self) -> None:
        """Forget what is stored (open episodes are kept)."""
        self.store.clear()
        self.ep_starts.clear()

    def forget_open(self) -> None:
        """Forget every open episode."""
        self.open.clear()
        self._staged.clear()

    def add_recent(self, env_id: str, returns: List[float], lengths: List[int]) -> None:
        """Record finished episodes for the stats."""
        now = time.time()
        for ret, length in zip(returns, lengths):
            self.recent.append({"env_id": env_id, "return": ret, "length": length, "time": now})

    def __repr__(self) -> str:
        return f"StorageWriter(unit={self.unit!r}, mode={self.mode!r}, open envs={sorted(self.open)})"
