"""Preallocated tensor storage: rows written in place, gathered by index.

`RowRing` is a dict of preallocated tensors ``[rows, ...]`` with wrap-around
slice writes and one ``index_select`` per key for gathers. On top of it:

- `TransitionStore`: one slot per transition, ``circular`` (overwrite the
  oldest) or ``standard`` (fill, then refuse).
- `EpisodeStore`: one slot per whole episode; the episodes' transitions live
  contiguously in a row ring that grows when episodes are longer than
  expected; whole episodes are evicted oldest first in circular mode.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np
import torch
from tensordict import TensorDict

from rlightning.buffer.utils.sequences import episode_windows

__all__ = ["RowRing", "TransitionStore", "EpisodeStore", "as_tensor_dict", "pack_tensordicts", "unpack_tensordicts"]

Spec = Dict[str, Tuple[Tuple[int, ...], torch.dtype]]


def as_tensor_dict(batch: Mapping) -> Dict[str, torch.Tensor]:
    """Dict of tensors from a dict of numpy arrays / tensors or a TensorDict (zero-copy where possible)."""
    items = batch.items() if not hasattr(batch, "_tensordict") else batch._tensordict.items()
    out = {}
    for k, v in items:
        if isinstance(v, np.ndarray):
            v = np.ascontiguousarray(v)
            if not v.flags.writeable:  # e.g. read from Ray's object store; only ever read here
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    v = torch.from_numpy(v)
            else:
                v = torch.from_numpy(v)
        elif not isinstance(v, torch.Tensor):
            raise TypeError(f"transition key {k!r} must be a tensor or an array, got {type(v).__name__}")
        out[k] = v
    return out


def _pack_one(value: Any) -> Any:
    if isinstance(value, TensorDict):
        return {"__td__": tuple(value.batch_size), "data": {k: v.cpu().numpy() for k, v in value.items()}}
    if isinstance(value, torch.Tensor):
        return {"__tensor__": value.cpu().numpy()}
    return value


def _unpack_one(value: Any) -> Any:
    if isinstance(value, dict) and "__td__" in value:
        data = {k: torch.from_numpy(np.array(v)) for k, v in value["data"].items()}
        return TensorDict._new_unsafe(data, batch_size=torch.Size(value["__td__"]))
    if isinstance(value, dict) and "__tensor__" in value:
        return torch.from_numpy(np.array(value["__tensor__"]))
    return value


def pack_tensordicts(value: Any) -> Any:
    """TensorDicts and tensors (alone or in a list) as numpy dicts: pickling torch tensors is slow, numpy is cheap."""
    if isinstance(value, list):
        return [pack_tensordicts(v) for v in value]
    return _pack_one(value)


def unpack_tensordicts(value: Any) -> Any:
    """Inverse of `pack_tensordicts`; arrays are copied (those read from Ray's object store are read-only)."""
    if isinstance(value, list):
        return [unpack_tensordicts(v) for v in value]
    return _unpack_one(value)


def _shape(s) -> str:
    return "(" + ", ".join(str(int(x)) for x in s) + ("," if len(s) == 1 else "") + ")"


class RowRing:
    """Preallocated rows keyed like a TensorDict, allocated from the first batch.

    Args:
        rows: Number of rows.
        device: Device of the tensors.
    """

    def __init__(self, rows: int, device: torch.device) -> None:
        self.rows = int(rows)
        self.device = torch.device(device)
        self.on_cpu = self.device.type == "cpu"  #: the rows live in host memory (a plain index_select reads them)
        #: Rows at least this large are written run by run (one copy); smaller ones by gather + scatter
        #: (two copies of a few bytes, far fewer Python calls).
        self.run_copy_min_bytes = 1024
        self.data: Optional[Dict[str, torch.Tensor]] = None
        self.spec: Optional[Spec] = None

    @property
    def allocated(self) -> bool:
        """True once the first batch fixed the keys, shapes and dtypes."""
        return self.data is not None

    def nbytes(self) -> int:
        """Bytes held by the tensors."""
        return 0 if self.data is None else sum(t.numel() * t.element_size() for t in self.data.values())

    def allocate(self, batch: Dict[str, torch.Tensor]) -> None:
        """Allocate every key's tensor from a batch's shapes and dtypes."""
        self.spec = {k: (v.shape[1:], v.dtype) for k, v in batch.items()}
        self.data = {
            k: torch.zeros((self.rows,) + shape, dtype=dtype, device=self.device)
            for k, (shape, dtype) in self.spec.items()
        }

    def check(self, batch: Dict[str, torch.Tensor], source: str) -> None:
        """Raise ValueError naming ``source`` and the key when ``batch`` does not match the stored layout."""
        if self.spec is None:
            n = None
            for k, v in batch.items():
                if v.ndim == 0:
                    raise ValueError(f"{source}: key {k!r} has no batch dimension (a scalar)")
                if n is None:
                    n = v.shape[0]
                elif v.shape[0] != n:
                    raise ValueError(f"{source}: key {k!r} has {v.shape[0]} rows, other keys have {n}")
            return
        if batch.keys() != self.spec.keys():
            missing = sorted(set(self.spec) - set(batch))
            extra = sorted(set(batch) - set(self.spec))
            raise ValueError(
                f"{source}: transition keys differ from the storage's: missing {missing}, unexpected {extra} "
                f"(the storage holds {sorted(self.spec)})"
            )
        n = -1
        spec = self.spec
        for k, v in batch.items():
            shape, dtype = spec[k]
            vs = v.shape
            if vs[1:] != shape or v.dtype != dtype:
                raise ValueError(
                    f"{source}: key {k!r} has shape {_shape(vs[1:])} and dtype {v.dtype}, "
                    f"expected shape {_shape(shape)} and dtype {dtype} (per row)"
                )
            if n != vs[0]:
                if n != -1:
                    raise ValueError(f"{source}: key {k!r} has {vs[0]} rows, other keys have {n}")
                n = vs[0]

    def copy_in(self, batch: Dict[str, torch.Tensor], pos: int, start: int = 0, n: Optional[int] = None) -> None:
        """Write rows ``start:start+n`` of ``batch`` at ``pos``, wrapping around the end."""
        total = batch[next(iter(batch))].shape[0]
        n = total - start if n is None else n
        first = min(n, self.rows - pos)
        end = pos + first
        if n == first and start == 0 and n == total:  # the common case: the whole batch, no wrap
            for k, dst in self.data.items():
                dst[pos:end].copy_(batch[k])
            return
        rest = n - first
        for k, dst in self.data.items():
            src = batch[k]
            dst[pos:end].copy_(src[start : start + first])
            if rest:
                dst[:rest].copy_(src[start + first : start + n])

    def copy_rows_to(self, source: Dict[str, torch.Tensor], idx: torch.Tensor, dst: torch.Tensor) -> int:
        """Write rows ``idx`` of ``source`` to rows ``dst`` (same length), with as few copies as possible.

        A contiguous ``dst`` is one ``index_select`` straight into the rows. Large rows (pixels) whose
        index runs are contiguous (a record's steps of one row, in time order) are copied run by run,
        one slice copy each; otherwise the rows are gathered, then scattered (two copies).

        Returns:
            Copies of each row made (1 or 2).
        """
        n = idx.numel()
        if n == 0:
            return 0
        on_dev = self.on_cpu and all(v.device.type == "cpu" for v in source.values())
        if not on_dev:  # another device: move only the rows written (a chunk or a staging holds more)
            source = {k: v.index_select(0, idx.to(v.device)).to(self.device) for k, v in source.items()}
            idx = torch.arange(n)
        d0 = int(dst[0])
        if n == 1 or int(dst[-1]) - d0 == n - 1 and bool(((dst[1:] - dst[:-1]) == 1).all()):  # contiguous dst
            i = idx if on_dev else idx.to(self.device)
            for k, out in self.data.items():
                if k in source:
                    torch.index_select(self._cast(source[k], out), 0, i, out=out[d0 : d0 + n])
            return 1
        runs = n
        if self._row_bytes() >= self.run_copy_min_bytes:
            step = ((idx[1:] - idx[:-1]) == 1) & ((dst[1:] - dst[:-1]) == 1)
            starts = torch.cat([torch.zeros(1, dtype=torch.int64), (~step).nonzero().squeeze(1) + 1])
            runs = starts.numel()
        if runs * 8 <= n:
            bounds = torch.cat([starts, torch.tensor([n])]).tolist()
            src_at = idx.index_select(0, starts).tolist()
            dst_at = dst.index_select(0, starts).tolist()
            for k, out in self.data.items():
                if k not in source:
                    continue
                src = self._cast(source[k], out)
                for r in range(runs):
                    length = bounds[r + 1] - bounds[r]
                    out[dst_at[r] : dst_at[r] + length].copy_(src[src_at[r] : src_at[r] + length])
            return 1
        i = idx if on_dev else idx.to(self.device)
        d = dst if on_dev else dst.to(self.device)
        for k, out in self.data.items():
            if k in source:
                out.index_copy_(0, d, self._cast(source[k], out).index_select(0, i))
        return 2

    def _row_bytes(self) -> int:
        return sum(v[0].numel() * v.element_size() for v in self.data.values()) if self.data else 0

    @staticmethod
    def _cast(src: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return src if src.dtype == like.dtype else src.to(like.dtype)

    def gather(self, idx: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Rows at ``idx`` (one ``index_select`` per key)."""
        if self.on_cpu is not (idx.device.type == "cpu"):
            idx = idx.to(self.device)
        return {k: v.index_select(0, idx) for k, v in self.data.items()}

    def resize(self, rows: int, order: torch.Tensor) -> None:
        """Reallocate with ``rows`` rows, keeping the rows at ``order`` at the front, in that order."""
        if self.data is not None:
            new = {}
            for k, v in self.data.items():
                t = torch.zeros((rows,) + tuple(v.shape[1:]), dtype=v.dtype, device=self.device)
                t[: order.shape[0]] = v.index_select(0, order.to(self.device))
                new[k] = t
            self.data = new
        self.rows = int(rows)


class TransitionStore:
    """One slot per transition.

    Args:
        capacity: Slots.
        mode: ``circular`` or ``standard``.
        device: Device of the tensors.
    """

    def __init__(self, capacity: int, mode: str, device: torch.device) -> None:
        self.capacity = int(capacity)
        self.mode = mode
        self.ring = RowRing(self.capacity, device)
        self.cursor = 0
        self.size = 0

    @property
    def num_transitions(self) -> int:
        """Stored transitions."""
        return self.size

    def free(self) -> int:
        """Slots that can be written before standard mode refuses."""
        return self.capacity - self.size

    def write(self, batch: Dict[str, torch.Tensor], n: int) -> int:
        """Write ``n`` transitions (already checked); return the first slot written (they wrap around)."""
        if not self.ring.allocated:
            self.ring.allocate(batch)
        start = 0
        if n > self.capacity:
            start, n = n - self.capacity, self.capacity
        pos = self.cursor
        self.ring.copy_in(batch, pos, start, n)
        self.cursor = (pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        return pos

    def claim(self, n: int) -> int:
        """Take ``n <= capacity`` slots for a caller that writes them itself; return the first (they wrap)."""
        if not self.ring.allocated:
            raise RuntimeError("TransitionStore.claim needs an allocated ring (write a first batch)")
        pos = self.cursor
        self.cursor = (pos + n) % self.capacity
        self.size = min(self.size + n, self.capacity)
        return pos

    def gather(self, idx: torch.Tensor) -> Dict[str, torch.Tensor]:
        """Transitions at slots ``idx``."""
        return self.ring.gather(idx)

    def ordered_slots(self) -> torch.Tensor:
        """All stored slots, oldest first."""
        if self.size < self.capacity:
            return torch.arange(self.size)
        return (torch.arange(self.capacity) + self.cursor) % self.capacity

    def clear(self) -> None:
        """Forget every transition (the tensors stay allocated)."""
        self.cursor = 0
        self.size = 0


class EpisodeStore:
    """One slot per episode; transitions live contiguously in a growing row ring.

    Args:
        capacity: Episode slots.
        mode: ``circular`` (evict the oldest episodes) or ``standard``.
        device: Device of the tensors.
        initial_rows: Rows of the transition ring before it first grows.
    """

    def __init__(self, capacity: int, mode: str, device: torch.device, initial_rows: Optional[int] = None) -> None:
        self.capacity = int(capacity)
        self.mode = mode
        self.ring = RowRing(initial_rows or max(256, 16 * self.capacity), device)
        self.ep_start = np.zeros(self.capacity, dtype=np.int64)
        self.ep_len = np.zeros(self.capacity, dtype=np.int64)
        self.ep_tail = 0
        self.size = 0
        self.row_head = 0
        self.rows_used = 0

    @property
    def num_transitions(self) -> int:
        """Transitions in the stored episodes."""
        return self.rows_used

    def free(self) -> int:
        """Episode slots that can be written before standard mode refuses."""
        return self.capacity - self.size

    def _slots(self, count: int, first: int = 0) -> np.ndarray:
        return (self.ep_tail + first + np.arange(count)) % self.capacity

    def _evict(self, count: int) -> None:
        if count <= 0:
            return
        slots = self._slots(count)
        self.rows_used -= int(self.ep_len[slots].sum())
        self.ep_len[slots] = 0
        self.ep_tail = (self.ep_tail + count) % self.capacity
        self.size -= count

    def _grow(self, needed: int) -> None:
        rows = self.ring.rows
        new_rows = max(2 * rows, needed + needed // 2)
        tail_row = int(self.ep_start[self.ep_tail]) if self.size else 0
        order = (torch.arange(self.rows_used) + tail_row) % rows
        self.ring.resize(new_rows, order)
        slots = self._slots(self.size)
        self.ep_start[slots] = (self.ep_start[slots] - tail_row) % rows
        self.row_head = self.rows_used

    def write(self, batch: Dict[str, torch.Tensor], lengths: np.ndarray) -> torch.Tensor:
        """Write whole episodes (concatenated in ``batch``); return the episode slots written."""
        lengths = np.asarray(lengths, dtype=np.int64)
        start_row = 0
        if lengths.shape[0] > self.capacity:
            skip = lengths.shape[0] - self.capacity
            start_row = int(lengths[:skip].sum())
            lengths = lengths[skip:]
        count = lengths.shape[0]
        total = int(lengths.sum())
        self._evict(self.size + count - self.capacity)
        if not self.ring.allocated:
            self.ring.allocate(batch)
        if self.rows_used + total > self.ring.rows:
            self._grow(self.rows_used + total)
        pos = self.row_head
        self.ring.copy_in(batch, pos, start_row, total)
        slots = self._slots(count, first=self.size)
        self.ep_start[slots] = (pos + np.cumsum(lengths) - lengths) % self.ring.rows
        self.ep_len[slots] = lengths
        self.row_head = (pos + total) % self.ring.rows
        self.rows_used += total
        self.size += count
        return torch.from_numpy(slots)

    def episode_rows(
        self,
        slots: torch.Tensor,
        slice_len: Optional[int] = None,
        generator: Optional[torch.Generator] = None,
        burn_in: int = 0,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Row indices ``[B, L]`` and mask ``[B, L]`` of whole episodes or random fixed-length slices.

        Padded steps repeat the episode's last row and are False in the mask. With ``burn_in`` the windows
        start up to that many steps before their slices (see `rlightning.buffer.utils.sequences`).
        """
        s = slots.cpu().numpy()
        start = torch.from_numpy(self.ep_start[s])
        length = torch.from_numpy(self.ep_len[s])
        rows, mask, _ = episode_windows(start, length, self.ring.rows, slice_len, burn_in, generator)
        return rows, mask

    def gather(
        self, slots: torch.Tensor, slice_len: Optional[int] = None, generator=None, burn_in: int = 0
    ) -> Dict[str, torch.Tensor]:
        """Episodes at ``slots`` as ``[B, L, ...]`` tensors plus ``mask`` (and ``burn_in`` with a burn-in)."""
        s = slots.cpu().numpy()
        start = torch.from_numpy(self.ep_start[s])
        length = torch.from_numpy(self.ep_len[s])
        rows, mask, burn = episode_windows(start, length, self.ring.rows, slice_len, burn_in, generator)
        b, w = rows.shape
        flat = self.ring.gather(rows.reshape(-1))
        out = {k: v.reshape((b, w) + tuple(v.shape[1:])) for k, v in flat.items()}
        out["mask"] = mask.to(self.ring.device)
        if burn is not None:
            out["burn_in"] = burn.to(self.ring.device)
        return out

    def ordered_rows(self) -> torch.Tensor:
        """Rows of every stored transition, oldest episode first."""
        if not self.size:
            return torch.zeros(0, dtype=torch.int64)
        tail_row = int(self.ep_start[self.ep_tail])
        return (torch.arange(self.rows_used) + tail_row) % self.ring.rows

    def clear(self) -> None:
        """Forget every episode (the tensors stay allocated)."""
        self.ep_len[:] = 0
        self.ep_tail = 0
        self.size = 0
        self.row_head = 0
        self.rows_used = 0
