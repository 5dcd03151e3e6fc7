"""rlightning sampling: the engine's rollout phase (EnvGroup <-> PolicyGroup, transitions into the buffer).

``--mode local``: env workers in this process; ``--mode ray``: env workers as
Ray actors acting with their own policy copy, one call per rollout (the
``cartpole_ppo`` preset's layout: ``cluster.inference=env_workers``);
``--mode ray-step``: env workers as Ray actors and the eval worker in this
process acting every step (``cluster.inference=eval_workers``); ``--mode
ray-all``: env, eval and storage workers all Ray actors; ``--mode floor``: the
Ray floor under ``--mode ray-step`` (benchmarks/ray_floor.py): per step, one
call per env worker to actors that do no env work, same payloads, resolved
together (no policy, no buffer). The policy is ``cartpole_ppo``'s MLP
(4 -> 64 -> 64 -> 2, tanh). A timed call is one ``engine.rollout()`` of 128
steps per worker; the on-policy buffer is emptied between calls, untimed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import List

import _common as c

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# Ray's workers import benchmarks.ray_floor (the floor's actor class) from the repository root.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
c.set_threads()

from rlightning.utils.builders import build_run  # noqa: E402
from rlightning.utils.config import apply_overrides, load_preset  # noqa: E402

STEPS = 128


def measure(case: str, cfg, a, name: str = "") -> None:
    engine = build_run(cfg).engine
    timed = [0.0]

    def rollout() -> int:
        t0 = time.perf_counter()
        steps = engine.rollout()["rollout_env_steps"]
        timed[0] += time.perf_counter() - t0
        engine.buffer.clear()
        return steps

    # Only the rollout calls are timed (the untimed clear is subtracted): env steps / rollout seconds.
    rollout()
    rates = []
    c.begin(name or case)
    for _ in range(a.repeats):
        timed[0], done, t_wall = 0.0, 0, time.perf_counter()
        while time.perf_counter() - t_wall < a.seconds:
            done += rollout()
        rates.append(done / timed[0])
    c.result(name or case, rates, "env steps/s")
    engine.close()


def measure_floor(case: str, a, name: str = "") -> None:
    """The Ray floor for ``case``: a timed call is STEPS floor steps of W echo actors (W x N x STEPS env steps)."""
    from benchmarks.ray_floor import floor_stepper

    w, n = c.parse_case(case)
    step, stop = floor_stepper([(f"floor_{i}", n) for i in range(w)])
    k = [0]

    def rollout() -> int:
        for _ in range(STEPS):
            step(k[0])
            k[0] += 1
        return STEPS * w * n

    c.begin(name or case)
    c.result(name or case, c.timed_rate(rollout, a.seconds, a.repeats), "env steps/s")
    stop()


def run_cases(modes: List[str], cases: List[str], a, prefixed: bool = False) -> None:
    """Every case in every mode (``ray`` and ``floor`` share one Ray runtime); ``prefixed``: report ``mode:case``."""
    remote = any(m != "local" for m in modes)
    if remote:
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    for mode in modes:
        for case in cases:
            name = f"{mode}:{case}" if prefixed else case
            if mode == "floor":
                measure_floor(case, a, name)
                continue
            measure(case, config(mode, case), a, name)
    if remote:
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


def config(mode: str, case: str, steps: int = STEPS, extra: tuple = ()):
    """``cartpole_ppo`` in the layout of ``mode`` for ``case`` (W x N), ``steps`` per rollout, ``extra`` overrides."""
    w, n = c.parse_case(case)
    remote = str(mode != "local").lower()
    all_remote = str(mode == "ray-all").lower()
    inference = "eval_workers" if mode == "ray-step" else "env_workers"
    return apply_overrides(
        load_preset("cartpole_ppo"),
        [
            f"env.num_workers={w}",
            f"env.num_envs={n}",
            f"cluster.remote_env={remote}",
            f"cluster.remote_eval={all_remote}",
            f"cluster.remote_storage={all_remote}",
            f"cluster.inference={inference}",
            f"train.rollout_steps={steps}",
            f"buffer.capacity={steps * w * n + 1}",
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
            *extra,
        ],
    )


def main() -> None:
    a = c.args(
        lambda p: p.add_argument("--mode", default="local", choices=["local", "ray", "ray-step", "ray-all", "floor"])
    )
    run_cases([a.mode], a.cases or [c.sampling_case(w, n) for w, n in c.CASES_SAMPLING], a)


if __name__ == "__main__":
    main()
