"""rlightning cold start: fresh interpreter -> ``Lab.local()`` -> ``build(cartpole_ppo)`` -> first ``step()`` result.

The harness passes its launch time (``--t0``); the figure is the wall-clock
from then to the first iteration's metrics, imports and Ray start included.
Its phases are reported too (seconds): ``imports_s`` (launch to rlightning
imported: interpreter, torch, rlightning), ``ray_start_s`` (``Lab.local``),
``build_s`` (``lab.build``: env, eval and train workers up) and
``first_step_s`` (``run.step()``).

``--ppo`` (``benchmarks/run --quick``): the same run then goes on as
rlightning_ppo.py's (``--max-seconds`` cap), timed from the built run, first
iteration included; ``--sampling MODES`` (``ray,ray-step,floor``) then measures
rlightning_sampling.py's cases (``--cases``) on the same Ray runtime,
reported as ``MODE:CASE``. One Ray start serves all three items.
"""

from __future__ import annotations

import time

import _common as c


def _more(p) -> None:
    p.add_argument("--ppo", action="store_true", help="then train the same run to the PPO target (or the cap)")
    p.add_argument("--sampling", default="", help="then these sampling modes (ray,ray-step,floor) on this Ray runtime")


a = c.args(_more)
c.begin("first iteration")  # nothing to set up: the clock started at launch
c.set_threads()

import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
if a.sampling:  # Ray's workers import benchmarks.ray_floor (the floor's actor class) from the repository root
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

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
        *(["train.return_window=20", "train.target_return=475.0"] if a.ppo else []),
    ],
)
run = lab.build(cfg)
marks.append(time.time())
built = time.perf_counter()
metrics = run.step()
marks.append(time.time())
seconds = marks[-1] - t0
phases = dict(zip(("imports_s", "ray_start_s", "build_s", "first_step_s"), c.phase_seconds(t0, marks)))
c.result("first iteration", [seconds], "s", iteration_metrics_keys=len(metrics), **phases)
if a.ppo:
    import rlightning_ppo  # noqa: E402

    c.begin("solve")
    rlightning_ppo.train_to_target(run.engine, a.max_seconds, built)
run.close()
if a.sampling:
    import rlightning_sampling  # noqa: E402

    rlightning_sampling.run_cases(a.sampling.split(","), a.cases, a, prefixed=True)
lab.shutdown()
