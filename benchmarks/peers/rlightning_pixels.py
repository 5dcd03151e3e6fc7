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
from pathlib import Path

import _common as c

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
# Ray's workers import benchmarks.pixel_env (the env's entry point) from the repository root.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
c.set_threads()

from rlightning_sampling import measure  # noqa: E402 - the same timed rollout loop as the CartPole rows

from benchmarks.pixel_env import register  # noqa: E402
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


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mode", default="ray", choices=["ray", "local"]))
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    for case in a.cases or CASES:
        measure(case, config(a.mode, case), a)
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


if __name__ == "__main__":
    main()
