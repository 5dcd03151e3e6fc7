"""Per-operation wall-clock totals, cheap enough for hot paths."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Dict, Iterator

__all__ = ["OpTimer"]


class OpTimer:
    """Accumulates calls and seconds per named operation."""

    def __init__(self) -> None:
        self._calls: Dict[str, int] = {}
        self._seconds: Dict[str, float] = {}

    def add(self, op: str, seconds: float) -> None:
        """Count one call of ``op`` that took ``seconds``."""
        self._calls[op] = self._calls.get(op, 0) + 1
        self._seconds[op] = self._seconds.get(op, 0.0) + seconds

    @contextmanager
    def time(self, op: str) -> Iterator[None]:
        """Context manager timing one call of ``op``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(op, time.perf_counter() - t0)

    def summary(self, reset: bool = False) -> Dict[str, Dict[str, float]]:
        """``{op: {"calls", "total_s", "mean_ms"}}``, optionally resetting the totals."""
        out = {
            op: {
                "calls": self._calls[op],
                "total_s": self._seconds[op],
                "mean_ms": 1e3 * self._seconds[op] / max(1, self._calls[op]),
            }
            for op in sorted(self._calls)
        }
        if reset:
            self._calls.clear()
            self._seconds.clear()
        return out

    @staticmethod
    def format(summary: Dict[str, Dict[str, float]]) -> str:
        """A small text table of a summary."""
        if not summary:
            return "no timed operations"
        lines = [f"{'operation':<16}{'calls':>10}{'total s':>12}{'mean ms':>12}"]
        for op, row in summary.items():
            lines.append(f"{op:<16}{row['calls']:>10d}{row['total_s']:>12.4f}{row['mean_ms']:>12.4f}")
        return "\n".join(lines)
