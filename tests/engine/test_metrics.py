import math

import numpy as np
import torch

from rlightning.engine.metrics import MetricsLog, read_metrics


def test_jsonl_written_and_cleaned(tmp_path):
    log = MetricsLog(tmp_path / "run", jsonl=True)
    row = log.log({"a": 1, "b": float("nan"), "t": torch.tensor(2.5), "n": np.float32(1.5), "obj": object()})
    assert row["b"] is None and row["t"] == 2.5 and row["n"] == 1.5 and row["obj"] is None
    log.log({"a": 2})
    log.close()
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["a"] for r in rows] == [1, 2]
    assert log.series("a") == [1, 2]
    assert not any(isinstance(v, float) and math.isnan(v) for v in rows[0].values())


def test_memory_only():
    log = MetricsLog(None)
    log.log({"x": 1})
    assert log.history[0]["x"] == 1
