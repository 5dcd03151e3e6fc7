"""Per-iteration, per-phase timing records kept by every engine.

``engine.timing.records`` is a list of plain dicts, one per iteration:
``{"iteration": 3, "rollout": 0.41, "update_dataset": 0.02, "train": 0.3,
"sync_weights": 0.01, "env_step": 0.2, "inference": 0.15, "buffer_add": 0.05,
"env_steps": 2048, "t_end": 12.9}``. Latency samples (env -> policy,
policy -> buffer) are kept in bounded lists. ``summary()`` aggregates them;
``plot_*`` draw them with matplotlib (imported only when called).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Iterator, List, Optional

PHASES = ("rollout", "update_dataset", "train", "sync_weights", "evaluate")
ROLLOUT_PARTS = ("env_step", "inference", "buffer_add")
LATENCIES = ("env_to_policy", "policy_to_buffer")


class Timing:
    """Timing records of an engine: phases per iteration, rollout parts, transfer latencies.

    Args:
        max_latency_samples: How many latency samples of each kind are kept.
    """

    def __init__(self, max_latency_samples: int = 20_000) -> None:
        self.records: List[Dict[str, float]] = []
        self.latencies: Dict[str, Deque[float]] = {k: deque(maxlen=max_latency_samples) for k in LATENCIES}
        self._current: Dict[str, float] = {}
        self._lock = threading.Lock()
        self._t0 = time.perf_counter()

    # ------------------------------------------------------------------ recording
    def begin_iteration(self, iteration: int) -> None:
        """Start the record of ``iteration``."""
        with self._lock:
            self._current = {"iteration": float(iteration)}

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Time a block and add it to the current iteration under ``name``."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        """Add ``seconds`` to ``name`` in the current iteration's record."""
        with self._lock:
            self._current[name] = self._current.get(name, 0.0) + float(seconds)

    def add_latency(self, kind: str, seconds: float) -> None:
        """Record one transfer latency sample (``env_to_policy`` or ``policy_to_buffer``)."""
        if kind not in self.latencies:
            raise KeyError(f"unknown latency kind {kind!r}; valid kinds: {', '.join(LATENCIES)}")
        if seconds > 0:
            self.latencies[kind].append(float(seconds))

    def end_iteration(self, **extra: float) -> Dict[str, float]:
        """Close the current record (adding ``extra`` values) and return it."""
        with self._lock:
            rec = dict(self._current)
            rec.update({k: float(v) for k, v in extra.items()})
            rec["t_end"] = time.perf_counter() - self._t0
            self.records.append(rec)
            self._current = {}
            return rec

    @property
    def current(self) -> Dict[str, float]:
        """A copy of the record being filled (the phase times so far)."""
        with self._lock:
            return dict(self._current)

    # ------------------------------------------------------------------ reading
    def summary(self) -> Dict[str, Dict[str, float]]:
        """Per phase and rollout part: total, mean, last seconds and share of the iteration time."""
        out: Dict[str, Dict[str, float]] = {}
        if not self.records:
            return out
        n = len(self.records)
        iter_total = sum(sum(r.get(p, 0.0) for p in PHASES) for r in self.records) or 1.0
        for key in PHASES + ROLLOUT_PARTS:
            values = [r.get(key, 0.0) for r in self.records]
            total = sum(values)
            if total == 0.0:
                continue
            out[key] = {"total": total, "mean": total / n, "last": values[-1], "share": total / iter_total}
        for kind, samples in self.latencies.items():
            if samples:
                ordered = sorted(samples)
                out[f"latency_{kind}"] = {
                    "mean": sum(ordered) / len(ordered),
                    "p50": ordered[len(ordered) // 2],
                    "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
                    "count": float(len(ordered)),
                }
        return out

    def table(self) -> List[Dict[str, Any]]:
        """The records as a list of dicts (a copy), ready for ``pandas.DataFrame``."""
        with self._lock:
            return [dict(r) for r in self.records]

    def __len__(self) -> int:
        return len(self.records)

    # ------------------------------------------------------------------ plots
    def plot(self, ax: Optional[Any] = None):
        """Stacked time per phase per iteration; returns the matplotlib Figure."""
        from rlightning.engine.timing_plots import plot_phases

        return plot_phases(self, ax=ax)

    def plot_latency(self, ax: Optional[Any] = None):
        """Histograms of env -> policy and policy -> buffer latencies; returns the Figure."""
        from rlightning.engine.timing_plots import plot_latency

        return plot_latency(self, ax=ax)

    def plot_throughput(self, ax: Optional[Any] = None):
        """Env steps per second over time; returns the Figure."""
        from rlightning.engine.timing_plots import plot_throughput

        return plot_throughput(self, ax=ax)
