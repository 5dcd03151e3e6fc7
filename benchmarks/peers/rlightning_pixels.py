"""rlightning pixel sampling: the engine's rollout phase on 84x84x4 uint8 frames, the Nature CNN acting.

``--mode ray``: env workers as Ray actors acting with their own PPO copy (the
built-in Nature CNN encoder, chosen from the image observation space), one call
per rollout (``cluster.inference=env_workers``); ``--mode local``: the same
workers in this process. The env is `benchmarks.pixel_env.SyntheticPixels`. A
timed call is one ``engine.rollout()`` of 32 steps per worker with the
transitions stored in the rollout buffer; the buffer is emptied between calls, untimed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import _common as c

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# Ray's workers import benchmarks.pixel_env (the env's entry point) from the repository root.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
c.set_threads()

from benchmarks.pixel_env import register  # noqa: E402
from rlightning.utils.builders import build_run  # noqa: E402
from rlightning.utils.config import apply_overrides, load_preset  # noqa: E402

CASES = ("2x16",)
STEPS = 32


def config(mode: str, case: str):
    w, n = c.parse_case(case)
    return apply_overrides(
        load_preset("cartpole_ppo"),
        [
            f"env.name={register()}",
            f"env.num_workers={w}",
            f"env.num_envs={n}",
            f"cluster.remote_env={str(mode == 'ray').lower()}",
            "cluster.inference=env_workers",
            f"train.rollout_steps={STEPS}",
            f"buffer.capacity={STEPS * w * n + 1}",
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
        ],
    )


def measure(case: str, mode: str, a) -> None:
    engine = build_run(config(mode, case)).engine
    timed = [0.0]

    def rollout() -> int:
        t0 = time.perf_counter()
        steps = engine.rollout()["rollout_env_steps"]
        timed[0] += time.perf_counter() - t0
        engine.buffer.clear()
        return steps

    rollout()
    rates = []
    c.begin(case)
    for _ in range(a.repeats):
        timed[0], done, t_wall = 0.0, 0, time.perf_counter()
        while time.perf_counter() - t_wall < a.seconds:
            done += rollout()
        rates.append(done / timed[0])
    c.result(case, rates, "env steps/s")
    engine.close()


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mode", default="ray", choices=["ray", "local"]))
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    for case in a.cases or CASES:
        measure(case, a.mode, a)
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


if __name__ == "__main__":
    main()
