"""`BufferSampler`: a data buffer's sampling (one batch per train worker, priorities) over its `ShardSet`."""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional

import torch
from tensordict import TensorDict

from rlightning.buffer.shard_recovery import ShardSet
from rlightning.buffer.sharding import cat_parts, interleave, split_batch
from rlightning.buffer.utils import EpisodeTable
from rlightning.buffer.utils.tensor_store import unpack_tensordicts
from rlightning.buffer.utils.timing import OpTimer
from rlightning.utils.ray.handle import resolve

__all__ = ["BufferSampler"]


class BufferSampler:
    """`DataBuffer.sample`, `can_sample` and `update_priorities`.

    Args:
        shards: The buffer's shards.
        table: Returns the buffer's episode table (raises when the buffer has no shards yet).
        sampler: The configured sampler name.
        unit: ``transition`` or ``episode``.
        clear_after_sample: Clear shards once a sample consumed them (on-policy).
        timer: The buffer's timings.
    """

    def __init__(
        self,
        shards: ShardSet,
        table: Callable[[], EpisodeTable],
        sampler: str,
        unit: str,
        clear_after_sample: bool,
        timer: OpTimer,
    ) -> None:
        self.shards = shards
        self.table = table
        self.sampler = sampler
        self.unit = unit
        self.clear_after_sample = clear_after_sample
        self.timer = timer

    def sample(self, batch_size: Optional[int] = None, num_batches: int = 1) -> List[TensorDict]:
        """Draw one batch per train worker from that worker's shards (one call per shard).

        Args:
            batch_size: Items per train worker (ignored by the ``all`` sampler).
            num_batches: Uniform sampler only: ``num_batches`` independent batches per train worker in the
                same calls, one after the other (rows ``[i * batch_size, (i + 1) * batch_size)`` the i-th);
                each is drawn as one ``sample(batch_size)`` would draw it, its share of every shard included.

        Returns:
            A list with one TensorDict per train worker (``batch_size * num_batches`` rows each).

        Raises:
            ValueError: a batch larger than what the worker's shards hold; ``num_batches`` not a positive
                integer, or above 1 with a sampler other than uniform.
            StorageShardLostError: a shard died and ``on_shard_loss`` is ``raise``.
        """
        if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 1:
            raise ValueError(f"num_batches must be a positive integer, got {num_batches!r}")
        if num_batches > 1 and self.sampler != "uniform":
            raise ValueError(
                f"num_batches={num_batches} draws several independent batches at once, which only the 'uniform' "
                f"sampler can; this buffer uses {self.sampler!r} (prioritized: the priorities change between "
                "batches): sample once per batch"
            )
        t0 = time.perf_counter()
        table = self.table()
        shards = self.shards
        local = shards.single_local() if table.num_train_workers == 1 else None
        if (
            local is not None
            and local.fast_sample
            and not self.clear_after_sample
            and type(batch_size) is int
            and 0 < batch_size <= shards.sizes[0]
            and batch_size <= local.size
        ):  # one local shard, one train worker: what `_sample` would do, without the routing
            with shards.handles[0].lock:  # the call a handle would make, under the worker's lock
                out = [local.sample(batch_size, num_batches)]
        else:
            out = shards.recovering(lambda: self._sample(batch_size, num_batches))
        self.timer.add("sample", time.perf_counter() - t0)
        return out

    def can_sample(self, batch_size: int) -> bool:
        """True when every train worker's shards hold at least ``batch_size`` items together (last known sizes)."""
        table = self.table()
        sizes = self.shards.sizes
        if self.sampler == "all":
            return sum(sizes) > 0
        return all(
            sum(sizes[s] for s in table.get_storages_for_train_worker(w)) >= batch_size
            for w in range(table.num_train_workers)
        )

    def _sample(self, batch_size: Optional[int], num_batches: int = 1) -> List[TensorDict]:
        table = self.table()
        sizes = self.shards.sizes
        s2w = table.get_storage_to_train_workers()
        sized = self.sampler != "all"
        if sized and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        shard_batch: Dict[int, Optional[int]] = {}
        for w in range(table.num_train_workers):
            shards = table.get_storages_for_train_worker(w)
            if not sized:
                shard_batch.update({s: None for s in shards})
            elif len(shards) == 1:
                shard_batch[shards[0]] = batch_size
            else:
                sizes = [sizes[s] for s in shards]
                shares = split_batch(batch_size, sizes, f"train worker {w}'s shards {shards}")
                shard_batch.update(dict(zip(shards, shares)))
        shards = [s for s in range(len(self.shards)) if s2w[s] and (not sized or shard_batch.get(s))]
        for s in shards:
            if sized and shard_batch[s] > sizes[s]:
                raise ValueError(
                    f"cannot sample batch_size={shard_batch[s]} for train workers {s2w[s]}: storage shard {s} "
                    f"holds {sizes[s]} {self.unit}s; add more data first or ask for fewer"
                )
        extra = (num_batches,) if num_batches > 1 else ()
        futures = [
            self.shards.submit_data(s, "sample_parts", len(s2w[s]), shard_batch[s], self.clear_after_sample, *extra)
            for s in shards
        ]
        results = unpack_tensordicts(resolve(futures))
        per_worker: List[List[TensorDict]] = [[] for _ in range(table.num_train_workers)]
        for s, parts in zip(shards, results):
            if self.clear_after_sample:
                sizes[s] = 0
            for w, part in zip(s2w[s], parts):
                if self.sampler == "prioritized" and part.batch_size[0]:
                    part.set("_shard", torch.full(part.batch_size[:1], s, dtype=torch.int64))
                per_worker[w].append(part)
        if num_batches > 1:  # batch i: the i-th share of every shard, as sample(batch_size) would draw it
            per_worker = [interleave(p, num_batches) if len(p) > 1 else p for p in per_worker]
        out = [cat_parts(p) for p in per_worker]
        if not sized:  # a worker fed by several shards still gets one shuffled whole
            out = [o[torch.randperm(o.batch_size[0])] if len(p) > 1 else o for o, p in zip(out, per_worker)]
        return out

    def update_priorities(self, batch_or_index: Any, priority: Any, shard: Any = None) -> None:
        """Set priorities of sampled items: pass the sampled TensorDict (its ``_index``/``_shard``), or indices.

        Raises:
            KeyError: a TensorDict without ``_index`` (not from the prioritized sampler).
        """
        self.table()
        if isinstance(batch_or_index, TensorDict):
            if "_index" not in batch_or_index.keys():
                raise KeyError("update_priorities needs a batch from the prioritized sampler (with '_index')")
            index = batch_or_index["_index"]
            shard = batch_or_index.get("_shard", None)
        else:
            index = torch.as_tensor(batch_or_index)
        index = index.reshape(-1).cpu()
        priority = torch.as_tensor(priority).reshape(-1).detach().cpu()
        shard = torch.zeros_like(index) if shard is None else torch.as_tensor(shard).reshape(-1).cpu()
        if not (index.shape == priority.shape == shard.shape):
            raise ValueError(
                f"update_priorities got {index.numel()} indices, {priority.numel()} priorities, {shard.numel()} shards"
            )
        futures = []
        for s in torch.unique(shard).tolist():
            sel = shard == s
            handle = self.shards.handles[int(s)]
            futures.append(handle.submit("update_priorities", index[sel].numpy(), priority[sel].numpy()))
        resolve(futures)
