"""Episodes in progress of one env worker: a preallocated tail of the steps still open.

A record chunk ``[N, T]`` of env ``E`` covers env steps ``t0 .. t0 + T - 1``
of every sub-env row. Each row has an open episode: its steps from
``open_start[row]`` on. When a chunk arrives, every row's closed episodes
(ending at a ``done`` step) are found with tensor ops over the sources that
hold open steps (one boolean mask ``[N, T]`` each); the storage writes them
straight from there. A record of ``HOLD_STEPS`` steps or more is then held
by reference (a caller must not write into a record after adding it);
shorter records' columns that open episodes still need are appended to a
preallocated tail (one slice copy per key), which drops the columns no open
episode reaches and grows by doubling.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

__all__ = ["Chunk", "HOLD_STEPS", "OpenEpisodes", "WritePlan"]

#: Records of at least this many steps are held by reference until their open episodes close (no copy);
#: shorter ones (per-step records) are copied into the env's preallocated tail.
HOLD_STEPS = 16


@dataclass
class Chunk:
    """One record's stored keys as rows ``[N * T, ...]`` (views of the record, never copies of it).

    A key whose record tensor is a strided view (``obs`` and ``next.obs`` are ``[:, :T]`` and
    ``[:, 1:]`` of one ``[N, T + 1]`` array) is kept as a row view of that array with its own row
    stride (``key_strides``): step ``c`` of sub-env ``r`` is row ``r * S + c``, and a write reads
    those rows straight from the record (see `groups`).

    Attributes:
        data: Stored key -> ``[N * T, ...]`` tensor (``[(N - 1) * S + T, ...]`` for a key with a row stride).
        n: Rows (sub-envs).
        t: Steps.
        kept: ``[N, T]`` steps that may be stored (valid, not dropped).
        done: ``[N, T]`` steps that close their episode.
        boot: ``[N, T]`` float32 value of each step's next observation, or None.
        t0: Env step of the chunk's first column (set when the chunk is pushed).
        stride: Columns allocated per row (``t`` for a record; more for the tail).
        col0: First used column (the tail's columns ``col0 .. col0 + t - 1``).
        key_strides: Key -> rows per sub-env ``S`` in ``data`` (keys of a record with strided views only).
        views: Key -> the record's own ``[N, T, ...]`` view (the keys in ``key_strides``).
    """

    data: Dict[str, torch.Tensor]
    n: int
    t: int
    kept: torch.Tensor
    done: torch.Tensor
    boot: Optional[torch.Tensor] = None
    t0: int = 0
    stride: int = 0
    col0: int = 0
    key_strides: Dict[str, int] = field(default_factory=dict)
    views: Dict[str, torch.Tensor] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.stride:
            self.stride = self.t
        self._rows: Optional[Dict[str, torch.Tensor]] = None

    def row_views(self) -> Dict[str, torch.Tensor]:
        """Each stored key as a ``[N, stride, ...]`` view (made once: the tail writes through them every step)."""
        if self._rows is None or self._rows.keys() != self.data.keys():
            self._rows = {k: v.view((self.n, self.stride) + tuple(v.shape[1:])) for k, v in self.data.items()}
        return self._rows

    def cols(self, x: torch.Tensor) -> torch.Tensor:
        """The used columns of a ``[N, stride]`` tensor."""
        return x if self.col0 == 0 and self.t == self.stride else x[:, self.col0 : self.col0 + self.t]

    def flat_index(self, idx: torch.Tensor) -> torch.Tensor:
        """Flat storage rows of flat indices into the used ``[N, t]`` columns."""
        if self.col0 == 0 and self.t == self.stride:
            return idx
        return (idx // self.t) * self.stride + self.col0 + idx % self.t

    def rows_of(self, key: str, idx: torch.Tensor) -> torch.Tensor:
        """Rows of ``data[key]`` holding the steps at flat storage rows ``idx``."""
        s = self.key_strides.get(key)
        return idx if s is None else (idx // self.t) * s + idx % self.t

    def groups(self, idx: torch.Tensor) -> List[Tuple[Dict[str, torch.Tensor], torch.Tensor]]:
        """``(keys, their rows)`` of the steps at flat storage rows ``idx``: one group per row stride."""
        if not self.key_strides:
            return [(self.data, idx)]
        by: Dict[Optional[int], Dict[str, torch.Tensor]] = {}
        for k, v in self.data.items():
            by.setdefault(self.key_strides.get(k), {})[k] = v
        return [(sub, idx if s is None else (idx // self.t) * s + idx % self.t) for s, sub in by.items()]

    def logical(self, key: str) -> torch.Tensor:
        """Key ``key`` as ``[N, T, ...]`` (a record chunk: ``stride == t``)."""
        view = self.views.get(key)
        if view is not None:
            return view
        v = self.data[key]
        return v.view((self.n, self.t) + tuple(v.shape[1:]))

    def flat(self, key: str) -> torch.Tensor:
        """Key ``key`` as contiguous ``[N * T, ...]`` rows (a copy for a key with a row stride)."""
        view = self.views.get(key)
        return self.data[key] if view is None else view.reshape((self.n * self.t,) + tuple(view.shape[2:]))

    def set_flat(self, key: str, value: torch.Tensor) -> None:
        """Replace key ``key`` by ``[N * T, ...]`` rows (a preprocessor's output)."""
        self.data[key] = value
        self.key_strides.pop(key, None)
        self.views.pop(key, None)


@dataclass
class WritePlan:
    """What one add (or truncation) writes: which steps of which chunks, and the episodes they form.

    Attributes:
        sources: ``(chunk, flat step indices)`` in write order (oldest chunk first, row-major).
        n: Steps written.
        perm: ``[n]`` episode order -> write order (episodes are each row's steps by time).
        lengths: ``[E]`` steps per episode, in episode order.
        boot: ``[E]`` float32 bootstrap value per episode (0 where unknown), or None.
        forced_ends: ``[k]`` episode-order positions whose step is marked truncated (manual truncation).
        open_start, dropping: the rows' state once the plan is committed.
    """

    sources: List[Tuple[Chunk, torch.Tensor]]
    n: int
    perm: torch.Tensor
    lengths: np.ndarray
    boot: Optional[torch.Tensor]
    open_start: torch.Tensor
    dropping: torch.Tensor
    forced_ends: Optional[torch.Tensor] = None
    chunk: Optional[Chunk] = None
    stats: List[Tuple[int, float, int]] = field(default_factory=list)
    acc: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
    #: ``perm`` is the identity (the steps are in episode order already).
    ordered: bool = False

    @property
    def num_episodes(self) -> int:
        """Episodes the plan closes."""
        return int(self.lengths.shape[0])

    def gather(self, key: str) -> torch.Tensor:
        """Key ``key`` of every written step, in write order (a copy: used for small keys and slow paths)."""
        parts = [c.data[key].index_select(0, c.rows_of(key, idx)) for c, idx in self.sources]
        return parts[0] if len(parts) == 1 else torch.cat(parts)


class OpenEpisodes:
    """The open episodes of one env worker's ``n`` sub-env rows.

    Args:
        env_id: The env worker.
        n: Its number of sub-envs.
    """

    def __init__(self, env_id: str, n: int) -> None:
        self.env_id = env_id
        self.n = int(n)
        self.tail: Optional[Chunk] = None
        #: Earlier chunks still needed, held by reference (records of ``HOLD_STEPS`` steps or more, frozen tails).
        self.held: List[Chunk] = []
        self.t = 0
        self.open_start = torch.zeros(self.n, dtype=torch.int64)
        self.dropping = torch.zeros(self.n, dtype=torch.bool)
        # Raw per-row return and length of the env's own episodes in progress (for stats).
        self.ret = torch.zeros(self.n, dtype=torch.float64)
        self.len = torch.zeros(self.n, dtype=torch.int64)

    # ------------------------------------------------------------------ queries

    @property
    def chunks(self) -> List[Chunk]:
        """The chunks held: records held by reference, then the tail."""
        return self.held + ([] if self.tail is None or self.tail.t == 0 else [self.tail])

    def _tail_masks(self, open_start: torch.Tensor, rows: torch.Tensor) -> List[Tuple[Chunk, torch.Tensor]]:
        out = []
        for c in self.chunks:
            times = c.t0 + torch.arange(c.t)
            mask = c.cols(c.kept) & rows[:, None] & (times[None, :] >= open_start[:, None])
            out.append((c, mask))
        return out

    @property
    def pending_transitions(self) -> int:
        """Steps of the open episodes (what a truncation would store)."""
        live = ~self.dropping
        return int(sum(int(m.sum()) for _, m in self._tail_masks(self.open_start, live)))

    # ------------------------------------------------------------------ planning

    def _plan(
        self,
        masks: List[Tuple[Chunk, torch.Tensor]],
        open_start: torch.Tensor,
        dropping: torch.Tensor,
        truncate: bool,
        chunk: Optional[Chunk],
    ) -> WritePlan:
        sources = []
        rows_l, times_l, done_l, boot_l = [], [], [], []
        has_boot = all(c.boot is not None for c, _ in masks) and bool(masks)
        for c, mask in masks:
            idx = mask.reshape(-1).nonzero().squeeze(1)
            if idx.numel() == 0:
                continue
            flat = c.flat_index(idx)
            sources.append((c, flat))
            rows_l.append(idx // c.t)
            times_l.append(c.t0 + idx % c.t)
            done_l.append(c.done.reshape(-1).index_select(0, flat))
            if has_boot:
                boot_l.append(c.boot.reshape(-1).index_select(0, flat))
        n = int(sum(idx.numel() for _, idx in sources))
        if n == 0:
            empty = torch.zeros(0, dtype=torch.int64)
            return WritePlan([], 0, empty, np.zeros(0, np.int64), None, open_start, dropping, chunk=chunk)
        rows = torch.cat(rows_l)
        times = torch.cat(times_l)
        span = int(times.max()) + 1
        perm = torch.argsort(rows * span + times)
        done_e = torch.cat(done_l).index_select(0, perm)
        forced = None
        if truncate:
            rows_e = rows.index_select(0, perm)
            last = torch.ones(n, dtype=torch.bool)
            last[:-1] = rows_e[1:] != rows_e[:-1]
            forced = (last & ~done_e).nonzero().squeeze(1)
            done_e = done_e | last
        ends = done_e.nonzero().squeeze(1)
        lengths = torch.diff(ends, prepend=torch.tensor([-1])).numpy().astype(np.int64)
        boot = torch.cat(boot_l).index_select(0, perm).index_select(0, ends) if has_boot else None
        return WritePlan(sources, n, perm, lengths, boot, open_start, dropping, forced_ends=forced, chunk=chunk)

    def plan_chunk(
        self,
        chunk: Chunk,
        bad: Optional[torch.Tensor],
        raw_reward: torch.Tensor,
        raw_done: torch.Tensor,
        valid: torch.Tensor,
    ) -> WritePlan:
        """Plan the writes of a new chunk (nothing is changed until `commit`).

        Args:
            chunk: The chunk (``kept`` and ``done`` before drops).
            bad: ``[N, T]`` steps whose episode is dropped (NaN with ``nan_guard="drop"``), or None.
            raw_reward: ``[N, T]`` rewards as the env gave them (for episode stats).
            raw_done: ``[N, T]`` env episode ends (for stats, whether or not they close episodes).
            valid: ``[N, T]`` valid steps (for stats).
        """
        if chunk.n != self.n:
            raise ValueError(f"env {self.env_id!r}: the record has {chunk.n} rows, earlier ones had {self.n}")
        chunk.t0 = self.t
        n, t = chunk.n, chunk.t
        done = chunk.done
        if not bool(done.any()) and not bool(raw_done.any()) and (bad is None or not bool(bad.any())):
            if not bool(self.dropping.any()):  # the common step: nothing closes, nothing to write
                r = torch.where(valid, raw_reward.to(torch.float64), torch.zeros((), dtype=torch.float64))
                acc = (self.ret + r.sum(1), self.len + valid.sum(1))
                empty = torch.zeros(0, dtype=torch.int64)
                plan = WritePlan([], 0, empty, np.zeros(0, np.int64), None, self.open_start, self.dropping, chunk=chunk)
                plan.acc = acc
                return plan
        seg = torch.cumsum(done, 1) - done.long()
        ndone = done.sum(1)
        badseg = torch.zeros(n, t + 1, dtype=torch.bool)
        if bad is not None and bool(bad.any()):
            badseg = torch.zeros(n, t + 1, dtype=torch.int64).scatter_add_(1, seg, bad.long()) > 0
        badseg[:, 0] |= self.dropping
        if bool(badseg.any()):
            chunk.kept = chunk.kept & ~badseg.gather(1, seg)
        closing = ndone > 0
        steps = torch.arange(t)
        last_done = torch.where(done, steps, torch.full_like(seg, -1)).max(1).values
        cur_mask = chunk.kept & (seg < ndone[:, None])
        masks = self._tail_masks(self.open_start, closing & ~badseg[:, 0]) + [(chunk, cur_mask)]
        open_start = torch.where(closing, self.t + last_done + 1, self.open_start)
        open_start = torch.where(~closing & badseg[:, 0], torch.full_like(open_start, self.t + t), open_start)
        dropping = badseg.gather(1, ndone[:, None]).squeeze(1)
        plan = self._plan(masks, open_start, dropping, False, chunk)
        plan.stats, plan.acc = self._episode_stats(raw_reward, raw_done & valid, valid)
        return plan

    def plan_truncate(self) -> WritePlan:
        """Plan closing every open episode by hand (the last step of each is marked truncated)."""
        live = ~self.dropping
        masks = self._tail_masks(self.open_start, live)
        open_start = torch.full((self.n,), self.t, dtype=torch.int64)
        return self._plan(masks, open_start, torch.zeros(self.n, dtype=torch.bool), True, None)

    def _episode_stats(self, reward: torch.Tensor, done: torch.Tensor, valid: torch.Tensor):
        """(row, return, length) of the env episodes that end in this chunk, and the new per-row totals."""
        n, t = reward.shape
        seg = torch.cumsum(done, 1) - done.long()
        ndone = done.sum(1)
        r = torch.where(valid, reward.to(torch.float64), torch.zeros((), dtype=torch.float64))
        rsum = torch.zeros(n, t + 1, dtype=torch.float64).scatter_add_(1, seg, r)
        cnt = torch.zeros(n, t + 1, dtype=torch.int64).scatter_add_(1, seg, valid.long())
        rsum[:, 0] += self.ret
        cnt[:, 0] += self.len
        acc = (rsum.gather(1, ndone[:, None]).squeeze(1), cnt.gather(1, ndone[:, None]).squeeze(1))
        stats: List[Tuple[int, float, int]] = []
        if bool(ndone.any()):
            ended = torch.arange(t + 1)[None, :] < ndone[:, None]
            rows, segs = ended.nonzero(as_tuple=True)
            rows, segs = rows[-100:], segs[-100:]
            stats = list(zip(rows.tolist(), rsum[rows, segs].tolist(), cnt[rows, segs].tolist()))
        return stats, acc

    # ------------------------------------------------------------------ committing

    def commit(self, plan: WritePlan) -> None:
        """Apply a plan: advance the rows' open episodes, keep the columns they still need in the tail."""
        self.open_start = plan.open_start
        self.dropping = plan.dropping
        if plan.acc is not None:
            self.ret, self.len = plan.acc
        chunk = plan.chunk
        end = self.t + (chunk.t if chunk is not None else 0)
        live = ~self.dropping
        need = int(self.open_start[live].min()) if bool(live.any()) else end
        if chunk is not None:
            self.t = end
        if need >= end:
            if self.tail is not None:
                self.tail.t = 0
            self.held = []
            return
        self.held = [c for c in self.held if c.t0 + c.t > need]
        if chunk is not None and chunk.t >= HOLD_STEPS:  # a long record: held as it is, no copy
            tail = self.tail
            if tail is not None and tail.t:
                cut = min(max(0, need - tail.t0), tail.t)
                if tail.t - cut > 0:
                    tail.col0 += cut
                    tail.t -= cut
                    tail.t0 += cut
                    self.held.append(tail)  # frozen: a fresh tail takes later short records
                self.tail = None
            self.held.append(chunk)
            return
        self._keep(need, chunk)

    def _keep(self, need: int, chunk: Optional[Chunk]) -> None:
        """Tail := its columns from env step ``need`` on, then the new chunk's (one slice copy per key)."""
        tail = self.tail
        kt, ot = 0, 0
        if tail is not None and tail.t:
            ot = max(0, need - tail.t0)
            kt = max(0, tail.t - ot)
        oc, kc = 0, 0
        if chunk is not None:
            oc = max(0, need - chunk.t0)
            kc = chunk.t - oc
        total = kt + kc
        kept_t0 = tail.t0 + ot if tail is not None else 0  # env step of the first tail column kept
        if (
            tail is None
            or total > tail.stride
            or tail.data.keys() != (chunk.data.keys() if chunk else tail.data.keys())
        ):
            stride = max(16, 2 * total)
            tail = self._alloc(chunk if chunk is not None else tail, stride, tail, ot, kt)
        elif tail.col0 + ot + kt + kc > tail.stride:  # no room after the used columns: move them to the front
            for v3 in tail.row_views().values():
                v3[:, :kt] = v3[:, tail.col0 + ot : tail.col0 + ot + kt].clone()
            for name in ("kept", "done", "boot"):
                x = getattr(tail, name)
                if x is not None:
                    x[:, :kt] = x[:, tail.col0 + ot : tail.col0 + ot + kt].clone()
            tail.col0 = 0
        else:
            tail.col0 += ot
        # (a reallocated tail starts at column 0 with its own t0: the kept columns keep their env steps)
        tail.t0 = kept_t0 if kt else (chunk.t0 + oc if chunk is not None else need)
        tail.t = kt
        if kc == 1 and chunk.t == 1:  # a per-step record ([N]): one column, written row-wise
            a = tail.col0 + kt
            data = chunk.data
            for k, v3 in tail.row_views().items():
                v3[:, a] = data[k]
            tail.kept[:, a] = chunk.kept[:, 0]
            tail.done[:, a] = chunk.done[:, 0]
            if tail.boot is not None:
                tail.boot[:, a] = chunk.boot[:, 0] if chunk.boot is not None else 0.0
            tail.t = kt + 1
        elif kc:
            a = tail.col0 + kt
            for k, v3 in tail.row_views().items():
                src = chunk.logical(k)
                v3[:, a : a + kc] = src[:, oc:]
            tail.kept[:, a : a + kc] = chunk.kept[:, oc:]
            tail.done[:, a : a + kc] = chunk.done[:, oc:]
            if tail.boot is not None:
                tail.boot[:, a : a + kc] = chunk.boot[:, oc:] if chunk.boot is not None else 0.0
            tail.t = kt + kc
        self.tail = tail

    def _alloc(self, like: Chunk, stride: int, old: Optional[Chunk], ot: int, kt: int) -> Chunk:
        n = self.n
        data = {}
        for k, v in like.data.items():
            data[k] = torch.zeros((n * stride,) + tuple(v.shape[1:]), dtype=v.dtype, device=v.device)
        boot = torch.zeros(n, stride, dtype=torch.float32) if like.boot is not None else None
        new = Chunk(
            data,
            n,
            0,
            torch.zeros(n, stride, dtype=torch.bool),
            torch.zeros(n, stride, dtype=torch.bool),
            boot,
            0,
            stride,
            0,
        )
        if old is not None and kt:
            a = old.col0 + ot
            for k, v in data.items():
                dst = v.view((n, stride) + tuple(v.shape[1:]))
                src = old.data[k].view((n, old.stride) + tuple(v.shape[1:]))
                dst[:, :kt] = src[:, a : a + kt]
            new.kept[:, :kt] = old.kept[:, a : a + kt]
            new.done[:, :kt] = old.done[:, a : a + kt]
            if boot is not None and old.boot is not None:
                boot[:, :kt] = old.boot[:, a : a + kt]
        return new

    def __repr__(self) -> str:
        held = 0 if self.tail is None else self.tail.t
        return f"OpenEpisodes({self.env_id!r}, n={self.n}, t={self.t}, tail steps={held})"
