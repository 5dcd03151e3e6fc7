"""Env stepping throughput of `EnvGroup` on CartPole-v1 with random actions, beside the limit.

The limit is the fastest gymnasium vectorisation of the same sub-environments
stepped in one process: ``gymnasium.make_vec`` with the env's own vector entry
point or ``SyncVectorEnv``, whichever is faster (both are shown). Ours is
`EnvGroup.step` with local workers, and with 1 and 2 Ray actor workers, each
worker running 1, 8 or 64 sub-environments. For 2 workers the limit steps
all 2 x N sub-environments in one process.

Random actions are drawn once, before timing, and replayed the same way in
every loop (for the group, as ready-made PolicyResponses), so the figures
compare stepping alone. Ray rows also show the Ray floor: the same calls
(one per worker per step, resolved together, same payloads) to actors that
only return a ready-made EnvRet. Each figure is the best of many short runs (robust
to a busy machine), limit and ours measured alternately.

    .venv/bin/python benchmarks/env.py              # all figures
    .venv/bin/python benchmarks/env.py --quick      # shorter timings
    .venv/bin/python benchmarks/env.py --no-ray     # local figures only

Targets: local at least 0.8x the limit; 2 Ray workers x 64 envs at least 0.3x.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Tuple

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
# On a busy machine the raylet may give up waiting for its agents (default 30 s) before Ray is up.
os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")

from benchmarks.ray_floor import floor_stepper  # noqa: E402
from rlightning.env import EnvGroup  # noqa: E402
from rlightning.types import BatchedData, PolicyResponse  # noqa: E402
from rlightning.utils.config import EnvConfig  # noqa: E402

ENV = "CartPole-v1"
NUM_ENVS = (1, 8, 64)
RING = 64
TARGETS = {"local": 0.8, "ray x2 @ 64": 0.3}


def _actions(num_envs: int, seed: int = 0) -> List[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2, size=num_envs, dtype=np.int64) for _ in range(RING)]


def _timed(step: Callable[[int], None], seconds: float) -> float:
    """Steps per second of ``step(k)`` over about ``seconds`` (vector steps, not env steps)."""
    step(0)
    n, k = 0, 0
    batch = 16
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(batch):
            step(k)
            k += 1
        n += batch
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def gym_stepper(num_envs: int, mode: str) -> Callable[[int], None]:
    """Step a gymnasium vector env of ``num_envs`` with replayed random actions."""
    env = gym.make_vec(ENV, num_envs=num_envs, vectorization_mode=mode)
    env.reset(seed=0)
    actions = _actions(num_envs)

    def step(k: int) -> None:
        env.step(actions[k % RING])

    return step


def group_stepper(group: EnvGroup) -> Callable[[int], None]:
    """Step every worker of an initialised group with replayed random actions."""
    group.reset(seed=0)
    ids = group.env_ids
    sizes = [m.num_envs for m in group.env_metas]
    ring = []
    for k in range(RING):
        resps = [PolicyResponse(i, action=_actions(n, seed=k)[0]) for i, n in zip(ids, sizes)]
        ring.append(BatchedData(ids, resps))

    def step(k: int) -> None:
        group.step(ring[k % RING])

    return step


def ray_floor_stepper(group: EnvGroup) -> Tuple[Callable[[int], None], Callable[[], None]]:
    """Step echo actors (one per worker of ``group``, see benchmarks/ray_floor.py): Ray's own cost per step."""
    return floor_stepper([(m.env_id, m.num_envs) for m in group.env_metas])


def measure(
    group: EnvGroup, total_envs: int, seconds: float, reps: int, floor: Optional[Callable[[int], None]] = None
) -> Dict[str, float]:
    """Best env steps/s of ``group``, the gymnasium limits and the Ray floor, measured alternately."""
    steppers = {"ours": group_stepper(group)}
    steppers.update({mode: gym_stepper(total_envs, mode) for mode in ("vector_entry_point", "sync")})
    if floor is not None:
        steppers["floor"] = floor
    best = {name: 0.0 for name in steppers}
    for _ in range(reps):
        for name, step in steppers.items():
            best[name] = max(best[name], _timed(step, seconds) * total_envs)
    return best


def build_group(num_workers: int, num_envs: int, remote: bool) -> EnvGroup:
    """An initialised group of ``num_workers`` CartPole workers of ``num_envs`` each."""
    group = EnvGroup([EnvConfig(name=ENV, num_envs=num_envs, num_cpus=1) for _ in range(num_workers)], remote=remote)
    group.init()
    return group


COLUMNS = ["config", "ours", "limit", "vector_ep", "sync", "/ limit", "ray floor", "/ floor", "target"]


def print_row(label: str, best: Dict[str, float], target: Optional[float]) -> List[str]:
    """One line: ours, the limit (fastest gymnasium vectorisation), both gymnasium figures, the ratio and target.

    Returns the same figures as table cells (`COLUMNS`)."""
    limit = max(best["vector_entry_point"], best["sync"])
    ratio = best["ours"] / limit if limit else 0.0
    floor = best.get("floor")
    floor_text = f"{floor:>12,.0f} {best['ours'] / floor:>7.2f}x" if floor else f"{'-':>12} {'-':>8}"
    verdict = ""
    if target is not None:
        verdict = f"  target >= {target:.1f}x: {'ok' if ratio >= target else 'MISSED'}"
    print(
        f"{label:<14} {best['ours']:>12,.0f} {limit:>12,.0f} {best['vector_entry_point']:>12,.0f} "
        f"{best['sync']:>12,.0f} {ratio:>7.2f}x {floor_text}{verdict}",
        flush=True,
    )
    figures = [best["ours"], limit, best["vector_entry_point"], best["sync"]]
    floor_cells = [f"{floor:,.0f}", f"{best['ours'] / floor:.2f}x"] if floor else ["-", "-"]
    return [label, *(f"{x:,.0f}" for x in figures), f"{ratio:.2f}x", *floor_cells, verdict.strip()]


def save_table(rows: List[List[str]], seconds: float, reps: int) -> None:
    """The table as a results file (``benchmarks/results/<date>-env.json``)."""
    from benchmarks.report import save

    head = f"EnvGroup env steps/s on {ENV}, random actions, best of {reps} runs of {seconds:g} s"
    table = {"columns": COLUMNS, "rows": rows}
    save("env", "EnvGroup stepping with random actions beside make_vec and the Ray floor", [{"text": head}, table])


def main(argv: Optional[List[str]] = None) -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter timings (a smoke run)")
    parser.add_argument("--no-ray", action="store_true", help="local figures only")
    parser.add_argument("--seconds", type=float, default=None, help="seconds per timed run")
    args = parser.parse_args(argv)
    seconds = args.seconds or (0.1 if args.quick else 0.25)
    reps = 3 if args.quick else 9

    print(f"EnvGroup env steps/s on {ENV}, random actions; limit = fastest make_vec in one process;")
    print("ray floor = the same calls to actors that do nothing but return a ready EnvRet")
    print(
        f"{'config':<14} {'ours':>12} {'limit':>12} {'vector_ep':>12} {'sync':>12} {'/limit':>8} "
        f"{'ray floor':>12} {'/floor':>8}"
    )
    rows = []
    for n in NUM_ENVS:
        group = build_group(1, n, remote=False)
        rows.append(print_row(f"local x1 @ {n}", measure(group, n, seconds, reps), TARGETS["local"]))
        group.close()
    if args.no_ray:
        save_table(rows, seconds, reps)
        return
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    acquire_ray(num_cpus=max(4, os.cpu_count() or 1), include_dashboard=False, log_to_driver=False)
    try:
        for workers in (1, 2):
            for n in NUM_ENVS:
                group = build_group(workers, n, remote=True)
                floor, stop = ray_floor_stepper(group)
                label = f"ray x{workers} @ {n}"
                rows.append(print_row(label, measure(group, workers * n, seconds, reps, floor), TARGETS.get(label)))
                stop()
                group.close()
    finally:
        release_ray()
    save_table(rows, seconds, reps)


if __name__ == "__main__":
    main()
