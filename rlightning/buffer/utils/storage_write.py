"""Writing finished episodes into a `Storage` (mixed into `Storage`), batched over steps where that is exact.

Every env step that closes episodes hands them to `_store_finished`. Storing
them one step at a time costs a post-process call, a layout check and a write
per step; with many sub-environments almost every step closes an episode. So
once a storage has stored one step's episodes (and so has checked their
layout), later steps' episodes are queued and stored together: one
post-process, one check and one write for many steps.

Queuing is used only where it cannot change what is stored:

- the transition unit (episode slots and ring growth depend on write grouping);
- the built-in post-processes (``default_postprocess_fn``, GAE), which treat
  every episode on its own, so a batch of several steps' episodes gets the
  same values as step by step;
- after a step's episodes passed the layout check: later steps have the same
  keys, per-row shapes and dtypes (the step checks enforce it), so they pass it
  too and no error can surface late;
- never more than the capacity at once (a circular write of more than the
  capacity skips rows, which grouping would change).

Every read or other write goes through `flush` first (the ``store`` property
flushes; ``size`` counts the queue without flushing), so what is read is
what step-by-step storing would hold.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional

import numpy as np
import torch

from rlightning.buffer.utils.episode_tracker import FinishedEpisodes
from rlightning.buffer.utils.tensor_store import EpisodeStore, TransitionStore, as_tensor_dict
from rlightning.buffer.utils.utils import _GAEPostprocess, default_postprocess_fn, run_postprocess

__all__ = ["StorageWriteMixin", "FLUSH_ROWS"]

#: Queued transitions that trigger a flush on their own (bounds the queue's memory and latency).
FLUSH_ROWS = 4096


def _episode_wise(fn) -> bool:
    """True for the post-processes known to treat each episode on its own."""
    return fn is default_postprocess_fn or type(fn) is _GAEPostprocess


def _concat(parts: List[FinishedEpisodes]) -> FinishedEpisodes:
    """Several FinishedEpisodes (same keys) as one, in order."""
    if len(parts) == 1:
        return parts[0]
    first = parts[0]
    data = {k: np.concatenate([p.data[k] for p in parts]) for k in first.data}
    lengths = np.concatenate([p.lengths for p in parts])
    rows = np.concatenate([p.rows for p in parts])
    boot = None
    if first.bootstrap_value is not None:
        boot = np.concatenate([p.bootstrap_value for p in parts])
    return FinishedEpisodes(first.env_id, data, lengths, rows, boot)


class StorageWriteMixin:
    """Storing finished episodes (expects the attributes set by `Storage.__init__`)."""

    _store: TransitionStore | EpisodeStore

    def _init_writes(self) -> None:
        self._pending: List[FinishedEpisodes] = []
        self._pending_n = 0
        # Set once a step's episodes were stored and checked: later ones may be queued (see the module doc).
        self._queue_ok = False

    @property
    def store(self) -> TransitionStore | EpisodeStore:
        """The tensor store, with every queued episode written."""
        if self._pending:
            self.flush()
        return self._store

    @property
    def size(self) -> int:
        """Stored slots: transitions, or episodes with ``unit="episode"`` (queued episodes included)."""
        if self._pending_n:
            return min(self._store.size + self._pending_n, self.capacity)
        return self._store.size

    def flush(self) -> None:
        """Write the queued episodes (one post-process, one check, one write)."""
        if not self._pending:
            return
        parts, self._pending, self._pending_n = self._pending, [], 0
        self._store_now(_concat(parts), record_rate=False)

    def _store_step_episodes(self, finished: FinishedEpisodes) -> None:
        """Store the episodes one step closed: queued where that is exact, else at once."""
        n = finished.num_transitions
        if not self._queue_ok or n > self.capacity:
            self.flush()
            self._store_now(finished)
            self._queue_ok = self.unit == "transition" and _episode_wise(self.postprocess_fn)
            return
        if self._pending_n + n > self.capacity:
            self.flush()
        self._pending.append(finished)
        self._pending_n += n
        self._rate.append((time.perf_counter(), self._lifetime_transitions + self._pending_n))
        if self._pending_n >= FLUSH_ROWS:
            self.flush()

    def _store_finished(self, finished: FinishedEpisodes) -> None:
        """Store episodes at once, after anything queued."""
        self.flush()
        self._store_now(finished)

    def _store_now(self, finished: FinishedEpisodes, record_rate: bool = True) -> None:
        data = as_tensor_dict(finished.data)
        if self.postprocess_fn is not default_postprocess_fn:
            t0 = time.perf_counter()
            data = run_postprocess(self.postprocess_fn, data, finished.lengths, finished.bootstrap_value)
            self._timer.add("postprocess", time.perf_counter() - t0)
        self._store.ring.check(data, f"env {finished.env_id!r}")
        self._write(data, finished.num_transitions, finished.lengths, record_rate=record_rate)

    def _write(
        self,
        batch: Dict[str, torch.Tensor],
        n: int,
        lengths: Optional[np.ndarray],
        t0: Optional[float] = None,
        op: str = "write",
        record_rate: bool = True,
    ) -> None:
        if n == 0:
            return
        t0 = t0 or time.perf_counter()
        prioritized = self.sampler.name == "prioritized"
        store = self._store
        if self.unit == "transition":
            pos = store.write(batch, n)
            if prioritized:
                self.sampler.on_write((torch.arange(min(n, self.capacity)) + pos) % self.capacity)
            if lengths is not None:
                starts = self._lifetime_transitions + np.cumsum(lengths) - lengths
                self._ep_starts.extend(starts.tolist())
        else:
            slots = store.write(batch, lengths)
            if prioritized:
                self.sampler.on_write(slots)
        self._lifetime_transitions += n
        now = time.perf_counter()
        if record_rate:
            self._rate.append((now, self._lifetime_transitions))
        self._timer.add(op, now - t0)
