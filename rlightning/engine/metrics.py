"""Metrics of a run: kept in memory for views, written as JSON lines (and TensorBoard if installed), and
handed to the run's experiment trackers (MLflow, W&B: `rlightning.utils.tracking`)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from rlightning.utils.logger import get_logger
from rlightning.utils.optional import missing_logger_message

logger = get_logger(__name__)


def _clean(value: Any) -> Any:
    """Make a metric value JSON-safe (floats for tensors and numpy scalars, None for NaN)."""
    if hasattr(value, "item") and callable(value.item):
        try:
            value = value.item()
        except (TypeError, ValueError):
            return None
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return None if isinstance(value, float) and not math.isfinite(value) else value
    if isinstance(value, str):
        return value
    return None


class MetricsLog:
    """Per-iteration metrics: a history list, a JSONL file and optional TensorBoard scalars.

    Args:
        run_dir: Folder of the run (None: keep in memory only).
        jsonl: Write ``metrics.jsonl`` under ``run_dir``.
        tensorboard: Also write TensorBoard scalars when ``tensorboard`` is importable.
        trackers: Experiment trackers (``log(row)``, ``close()``) each row also goes to.
    """

    def __init__(
        self,
        run_dir: Optional[Path] = None,
        jsonl: bool = True,
        tensorboard: bool = False,
        trackers: Sequence[Any] = (),
    ) -> None:
        self.history: List[Dict[str, Any]] = []
        self.trackers = list(trackers)
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self._file = None
        self._tb = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            if jsonl:
                self._file = open(self.run_dir / "metrics.jsonl", "a", encoding="utf-8")  # noqa: SIM115
            if tensorboard:
                try:
                    from torch.utils.tensorboard import SummaryWriter

                    self._tb = SummaryWriter(str(self.run_dir / "tb"))
                except ImportError:
                    logger.warning("%s; writing no TensorBoard files", missing_logger_message("tensorboard"))

    def log(self, metrics: Dict[str, Any]) -> Dict[str, Any]:
        """Record one iteration's metrics; returns the cleaned dict."""
        row = {k: _clean(v) for k, v in metrics.items()}
        row.setdefault("time", time.time())
        self.history.append(row)
        if self._file is not None:
            self._file.write(json.dumps(row) + "\n")
            self._file.flush()
        if self._tb is not None:
            step = int(row.get("env_steps") or len(self.history))
            for k, v in row.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("time", "iteration"):
                    self._tb.add_scalar(k, v, step)
        for tracker in self.trackers:
            tracker.log(row)
        return row

    def series(self, key: str) -> List[float]:
        """The values of ``key`` over the iterations that have it."""
        return [row[key] for row in self.history if isinstance(row.get(key), (int, float))]

    def close(self) -> None:
        """Close the files."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if self._tb is not None:
            self._tb.close()
            self._tb = None
        trackers, self.trackers = self.trackers, []
        for tracker in trackers:
            tracker.close()


def read_metrics(path: Path) -> List[Dict[str, Any]]:
    """Read a ``metrics.jsonl`` file back."""
    rows = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                rows.append(json.loads(line))
    return rows
