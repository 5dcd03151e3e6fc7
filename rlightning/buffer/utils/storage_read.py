"""`StorageReader`: sampling, priorities and whole-data copies of a storage's preallocated tensors."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from tensordict import TensorDict

__all__ = ["StorageReader"]


def _td(data: Dict[str, torch.Tensor], batch_size: torch.Size) -> TensorDict:
    # Values are tensors, never nested dicts: ``nested=False`` copies the dict in one update.
    return TensorDict._new_unsafe(data, batch_size=batch_size, nested=type(data) is not dict)


class StorageReader:
    """Sampling and copies of what a store holds.

    Args:
        store: The storage's `TransitionStore` or `EpisodeStore`.
        sampler: Its sampler (`rlightning.buffer.utils.samplers`).
        unit: ``transition`` or ``episode``.
        slice_len: Episode unit: sample slices of this many steps (None: whole episodes).
        generator: Generator of the slice offsets.
        timer: Timings of the reads.
        burn_in: Episode unit with ``slice_len``: steps before each slice (``burn_in`` key of a batch).
    """

    def __init__(
        self, store: Any, sampler: Any, unit: str, slice_len: Optional[int], generator, timer, burn_in: int = 0
    ) -> None:
        self.store = store
        self.sampler = sampler
        self.unit = unit
        self.slice_len = slice_len
        self.burn_in = int(burn_in)  # steps before each slice, to warm up a recurrent state
        self.capacity = store.capacity
        self.device = store.ring.device
        self._generator = generator
        self._timer = timer
        #: The hot path of off-policy training applies: transition unit, uniform sampler.
        self.fast_sample = unit == "transition" and sampler.name == "uniform"

    def _check_sample_args(self, batch_size: Optional[int], num_parts: int, num_batches: int = 1) -> None:
        if isinstance(num_parts, bool) or not isinstance(num_parts, (int, np.integer)) or num_parts < 1:
            raise ValueError(f"num_parts must be a positive integer, got {num_parts!r}")
        if isinstance(num_batches, bool) or not isinstance(num_batches, (int, np.integer)) or num_batches < 1:
            raise ValueError(f"num_batches must be a positive integer, got {num_batches!r}")
        if num_batches > 1 and self.sampler.name != "uniform":
            raise ValueError(
                f"num_batches={num_batches} draws several independent batches at once, which only the 'uniform' "
                f"sampler can (its draws are independent); this storage uses {self.sampler.name!r}: sample "
                "once per batch"
            )
        if not self.sampler.sized:
            return
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        if batch_size > self.store.size:
            raise ValueError(
                f"cannot sample batch_size={batch_size} {self.unit}s: the storage holds {self.store.size} "
                f"(capacity {self.capacity}); add more data first or ask for fewer"
            )

    def _empty(self) -> TensorDict:
        return TensorDict({}, batch_size=[0])

    def _gather(self, idx: torch.Tensor) -> Dict[str, torch.Tensor]:
        if self.unit == "transition":
            return self.store.gather(idx)
        return self.store.gather(idx, self.slice_len, self._generator, self.burn_in)

    def sample(self, batch_size: int, num_batches: int = 1) -> TensorDict:
        """Draw one batch with the storage's sampler (or ``num_batches`` of them, one after the other).

        ``num_batches``: the uniform sampler's ``num_batches`` independent batches in one draw, rows
        ``[i * batch_size, (i + 1) * batch_size)`` the i-th (an off-policy iteration's gradient steps).

        Returns:
            ``[batch_size * num_batches]`` transitions, or ``[batch_size, L]`` episodes (or slices) with a
            ``mask`` for ``unit="episode"``. The ``all`` sampler returns every stored item, shuffled.

        Raises:
            ValueError: batch_size not positive, or larger than what is stored; num_batches > 1 with a sampler
                other than uniform.
        """
        size = self.store.size
        fast = self.fast_sample and type(batch_size) is int and 0 < batch_size <= size
        if not fast or type(num_batches) is not int or num_batches < 1:
            return self.sample_parts(1, batch_size, num_batches)[0]
        # The hot path of off-policy training: one randint, one index_select per key.
        t0 = time.perf_counter()
        ring = self.store.ring
        rows = batch_size * num_batches
        idx = torch.randint(size, (rows,), generator=self.sampler.generator)
        if ring.on_cpu:
            out = _td({k: v.index_select(0, idx) for k, v in ring.data.items()}, torch.Size((rows,)))
        else:
            out = _td(ring.gather(idx), torch.Size((rows,)))
        self._timer.add("sample", time.perf_counter() - t0)
        return out

    def sample_parts(
        self, num_parts: int = 1, batch_size: Optional[int] = None, num_batches: int = 1
    ) -> List[TensorDict]:
        """Draw ``num_parts`` batches in one gather (one per train worker this shard serves).

        Args:
            num_parts: Number of batches.
            batch_size: Items per batch (ignored by the ``all`` sampler, which splits
                everything stored evenly over the parts).
            num_batches: Uniform sampler: each part holds this many independent batches, one after the other.

        Returns:
            The batches. With the prioritized sampler each carries ``_index`` (slot)
            and ``_weight`` (importance weight).
        """
        t0 = time.perf_counter()
        self._check_sample_args(batch_size, num_parts, num_batches)
        size = self.store.size
        if not self.store.ring.allocated:
            parts = [self._empty() for _ in range(num_parts)]
        else:
            if self.sampler.sized:
                if self.sampler.name == "batch" and batch_size * num_parts > size:
                    draws = [self.sampler.sample(batch_size, size) for _ in range(num_parts)]
                    idx = torch.cat([d[0] for d in draws])
                    extra: Dict[str, torch.Tensor] = {}
                else:
                    idx, extra = self.sampler.sample(batch_size * num_batches * num_parts, size)
                counts = [int(batch_size) * int(num_batches)] * num_parts
            else:
                idx, extra = self.sampler.sample(size, size)
                counts = [size // num_parts + (1 if i < size % num_parts else 0) for i in range(num_parts)]
            data = self._gather(idx)
            if self.sampler.name == "prioritized":
                data["_index"] = idx.to(self.device)
            for k, v in extra.items():
                data[k] = v.to(self.device)
            tail = tuple(next(iter(data.values())).shape[1:2]) if self.unit == "episode" else ()
            if num_parts == 1:
                parts = [_td(data, torch.Size((counts[0],) + tail))]
            else:
                parts = []
                offset = 0
                for count in counts:
                    part = {k: v.narrow(0, offset, count) for k, v in data.items()}
                    parts.append(_td(part, torch.Size((count,) + tail)))
                    offset += count
        self._timer.add("sample", time.perf_counter() - t0)
        return parts

    def update_priorities(self, index: Any, priority: Any) -> None:
        """Set priorities of sampled slots (the batch's ``_index``), e.g. to absolute TD errors.

        Raises:
            ValueError: the storage's sampler is not prioritized, or bad priorities.
            IndexError: a slot outside what is stored.
        """
        if self.sampler.name != "prioritized":
            raise ValueError(f"update_priorities needs sampler='prioritized'; this storage uses {self.sampler.name!r}")
        idx = torch.as_tensor(index).reshape(-1).cpu()
        if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= self.store.size):
            raise IndexError(
                f"update_priorities: index out of range [0, {self.store.size}): {int(idx.min())}..{int(idx.max())}"
            )
        with self._timer.time("update_priorities"):
            self.sampler.update_priorities(idx, torch.as_tensor(priority))

    def get_data(self) -> TensorDict:
        """All stored transitions as a TensorDict ``[n]``, oldest first (a copy)."""
        if not self.store.ring.allocated:
            return self._empty()
        if self.unit == "transition":
            rows = self.store.ordered_slots()
        else:
            rows = self.store.ordered_rows()
        return _td(self.store.ring.gather(rows), torch.Size([rows.shape[0]]))

    def sample_rows(self, n: int = 5) -> TensorDict:
        """The ``n`` most recently stored transitions (for display), oldest first."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"sample_rows n must be a non-negative integer, got {n!r}")
        if not self.store.ring.allocated:
            return self._empty()
        rows = self.store.ordered_slots() if self.unit == "transition" else self.store.ordered_rows()
        rows = rows[max(0, rows.shape[0] - int(n)) :]
        return _td(self.store.ring.gather(rows), torch.Size([rows.shape[0]]))
