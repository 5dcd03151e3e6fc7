"""rlightning cold start: fresh interpreter -> ``Lab.local()`` -> ``build(cartpole_ppo)`` -> first ``step()`` result.

The harness passes its launch time (``--t0``); the figure is the wall-clock
from then to the first iteration's metrics, imports and Ray start included.
Its phases are reported too (seconds): ``imports_s`` (launch to rlightning
imported: interpreter, torch, rlightning), ``ray_start_s`` (``Lab.local``),
``build_s`` (``lab.build``: env, eval and train workers up) and
``first_step_s`` (``run.step()``).
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

t0 = a.t0 or time.time()
marks = [time.time()]
lab = Lab.local(num_cpus=4)
marks.append(time.time())
cfg = apply_overrides(
    load_preset("cartpole_ppo"),
    [
        "log.progress=false",
        "log.jsonl=false",
        f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
    ],
)
run = lab.build(cfg)
marks.append(time.time())
metrics = run.step()
marks.append(time.time())
seconds = marks[-1] - t0
phases = dict(zip(("imports_s", "ray_start_s", "build_s", "first_step_s"), c.phase_seconds(t0, marks)))
c.result("first iteration", [seconds], "s", iteration_metrics_keys=len(metrics), **phases)
lab.shutdown()
