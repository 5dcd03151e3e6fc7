"""rlightning cold start: fresh interpreter -> ``Lab.local()`` -> ``build(cartpole_ppo)`` -> first ``step()`` result.

The harness passes its launch time (``--t0``); the figure is the wall-clock
from then to the first iteration's metrics, imports and Ray start included.
"""

from __future__ import annotations

import time

import _common as c

a = c.args()
c.begin("first iteration")  # nothing to set up: the clock started at launch
c.set_threads()

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from rlightning.notebook import Lab  # noqa: E402
from rlightning.utils.config import apply_overrides, load_preset  # noqa: E402

lab = Lab.local(num_cpus=4)
cfg = apply_overrides(
    load_preset("cartpole_ppo"),
    [
        "log.progress=false",
        "log.jsonl=false",
        f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
    ],
)
run = lab.build(cfg)
metrics = run.step()
seconds = time.time() - (a.t0 or time.time())
c.result("first iteration", [seconds], "s", iteration_metrics_keys=len(metrics))
lab.shutdown()
