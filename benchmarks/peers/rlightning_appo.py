"""rlightning APPO learner throughput on CartPole-v1: the ``cartpole_appo`` preset (asyncrl, V-trace).

Env steps the learner trained on per second of wall-clock, over ``--seconds`` of training after two
warm-up iterations (actors on stale weights keep collecting meanwhile; the figure counts what the
learner consumed). ``--mode local`` is the preset as shipped (env workers in this process, acting with
their policy copies); ``--mode ray`` puts the env workers on Ray. One value per repeat.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import _common as c

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
c.set_threads()

from rlightning.utils.builders import build_run  # noqa: E402
from rlightning.utils.config import apply_overrides, load_preset  # noqa: E402
from rlightning.utils.ray.runtime import acquire_ray, release_ray  # noqa: E402


def main() -> None:
    def extra(p) -> None:
        p.add_argument("--mode", default="local", choices=["local", "ray"])

    a = c.args(extra)
    remote = a.mode == "ray"
    if remote:
        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    cfg = apply_overrides(
        load_preset("cartpole_appo"),
        [
            f"cluster.remote_env={str(remote).lower()}",
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
            f"seed={a.seed}",
            "train.target_return=null",
            "train.iterations=100000",
        ],
    )
    engine = build_run(cfg).engine
    engine.step()
    engine.step()  # warm-up: the actors are running ahead now
    seconds = a.seconds if a.seconds > 2.0 else 20.0
    c.begin("learner throughput")
    rates, trained = [], 0
    for _ in range(a.repeats):
        steps0, t0 = engine.env_steps, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            engine.step()
        rates.append((engine.env_steps - steps0) / (time.perf_counter() - t0))
        trained = engine.env_steps
    c.result(
        "learner throughput",
        rates,
        "env steps/s",
        env_steps=trained,
        final_return=float(engine.last_metrics.get("episode_return_mean", 0.0)),
        batch_policy_lag=float(engine.last_metrics.get("batch_policy_lag", 0.0)),
    )
    engine.close()
    if remote:
        release_ray()


if __name__ == "__main__":
    main()
