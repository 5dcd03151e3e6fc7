"""Routing rollout requests over the workers that compute actions.

Sync mode splits a batch evenly over the idle workers (all of them, when a
blocking engine calls); async mode sends each batch to the least-loaded
worker, counted in outstanding calls. A Ray worker answers with one
ObjectRef per item (``num_returns``), so results can be resolved together or
passed on as futures; a local worker answers at once.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from rlightning.types import is_object_ref
from rlightning.utils.ray.handle import WorkerHandle, resolve

MODES = ("sync", "async")


class RolloutRouter:
    """Sends rollout batches to workers and tracks their load.

    Args:
        workers: Handles of the workers that compute actions.
        mode: ``sync`` (split evenly over idle workers) or ``async`` (least loaded).

    Raises:
        ValueError: no workers, or an unknown mode.
    """

    def __init__(self, workers: Sequence[WorkerHandle], mode: str = "sync") -> None:
        if not workers:
            raise ValueError("RolloutRouter needs at least one worker")
        if mode not in MODES:
            raise ValueError(f"rollout_mode={mode!r} is not a rollout mode; use one of {MODES}")
        self.workers = list(workers)
        self.mode = mode
        self._outstanding: List[List[Any]] = [[] for _ in self.workers]
        self._calls = [0] * len(self.workers)
        self._rows = [0] * len(self.workers)
        self._next = 0

    def _prune(self) -> None:
        refs = [r for per in self._outstanding for r in per]
        if not refs:
            return
        import ray

        ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        done = set(ready)
        self._outstanding = [[r for r in per if r not in done] for per in self._outstanding]

    def loads(self) -> List[int]:
        """Outstanding calls per worker."""
        self._prune()
        return [len(per) for per in self._outstanding]

    def plan(self, n_items: int) -> List[Tuple[int, int, int]]:
        """(worker index, start, end) chunks for a batch of ``n_items``."""
        if n_items == 0:
            return []
        loads = self.loads()
        n = len(self.workers)
        order = [(self._next + k) % n for k in range(n)]  # round-robin among equals
        if self.mode == "sync":
            idle = [i for i in order if loads[i] == 0] or order
            k = min(len(idle), n_items)
            base, extra = divmod(n_items, k)
            chunks, start = [], 0
            for j in range(k):
                size = base + (1 if j < extra else 0)
                chunks.append((idle[j], start, start + size))
                start += size
            self._next = (idle[k - 1] + 1) % n
            return chunks
        best = min(order, key=lambda i: loads[i])
        self._next = (best + 1) % n
        return [(best, 0, n_items)]

    def submit(self, items: List[Any], per_item: bool = True) -> List[Any]:
        """Start the rollout of ``items`` (EnvRets or ObjectRefs).

        Args:
            items: What to answer, in order.
            per_item: One future per item (a Ray call with ``num_returns``); otherwise one
                future per worker call, each resolving to that chunk's list of responses
                (cheaper: one serialized argument and one result per call).

        Returns:
            ``per_item``: one entry per item, an ObjectRef (Ray worker) or a PolicyResponse
            (local worker). Otherwise ``(start, end, future_or_list)`` per worker call.
        """
        chunks = self.plan(len(items))
        has_refs = any(is_object_ref(x) for x in items)
        if has_refs and any(not self.workers[i].is_remote for i, _, _ in chunks):
            items = resolve(items)  # local workers need values; one ray.get for all
            has_refs = False
        out: List[Any] = [None] * len(items) if per_item else []
        for i, start, end in chunks:
            handle, chunk = self.workers[i], items[start:end]
            self._calls[i] += 1
            self._rows[i] += len(chunk)
            if not handle.is_remote:
                with handle.lock:  # the call a handle makes, made directly (one call at a time per worker)
                    result = handle.worker.rollout_batch(chunk)
            elif per_item:
                result = handle.worker.rollout_unpacked.options(num_returns=len(chunk)).remote(*chunk)
                result = [result] if len(chunk) == 1 else list(result)
                self._outstanding[i].append(result[0])
            elif has_refs:  # as arguments, so Ray resolves them before the call runs
                result = handle.worker.rollout_many.remote(*chunk)
                self._outstanding[i].append(result)
            else:  # one argument: serialising one list is much cheaper than one argument per item
                result = handle.worker.rollout_batch.remote(chunk)
                self._outstanding[i].append(result)
            if per_item:
                out[start:end] = result
            else:
                out.append((start, end, result))
        return out

    def forget(self, futures: Sequence[Any]) -> None:
        """Stop tracking calls whose results were resolved by the caller."""
        done = {f for f in futures if is_object_ref(f)}
        if done:
            self._outstanding = [[r for r in per if r not in done] for per in self._outstanding]

    def forget_worker(self, index: int) -> None:
        """Drop the outstanding calls of worker ``index`` (it was replaced)."""
        self._outstanding[index] = []

    def replace_worker(self, index: int, worker: WorkerHandle) -> None:
        """Route to ``worker`` in slot ``index`` from now on (a relaunched eval worker)."""
        self.workers[index] = worker
        self.forget_worker(index)

    def stats(self) -> List[Dict[str, int]]:
        """Per worker: calls routed, items routed, calls outstanding."""
        loads = [len(per) for per in self._outstanding]
        return [{"calls": c, "items": r, "outstanding": o} for c, r, o in zip(self._calls, self._rows, loads)]
