"""Sweep overhead: K trials through ``lab.sweep`` against the same K runs built and run by hand, in one sitting.

Both sides run the same K configs (CartPole PPO, one env worker each as a Ray actor) on the same local
runtime, ``--concurrent`` at a time (default: all K): the hand side builds them with ``lab.build`` and
``run.start``s them together, in waves of ``--concurrent``; the sweep side gives Tune the same K learning
rates as a grid with ``max_concurrent``. The figure is the ratio of the wall-clock times (sweep / by hand;
the issue's goal is at most 1.1), each side the median of ``--repeats`` rounds, the sides alternating.

    python benchmarks/sweep_overhead.py --trials 2 --iterations 20 --repeats 3
    python benchmarks/sweep_overhead.py --trials 4 --concurrent 2 --iterations 15 --repeats 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rlightning.notebook import Lab
from rlightning.utils.config import apply_overrides, load_preset


def config(run_dir: str, iterations: int):
    return apply_overrides(
        load_preset("cartpole_ppo"),
        [
            "env.num_workers=1",
            "env.num_envs=4",
            "env.num_cpus=0.5",
            "train.rollout_steps=64",
            f"train.iterations={iterations}",
            "train.target_return=null",  # the preset stops a run at 475; a trial runs to its stop (iterations)
            "log.progress=false",
            f"log.run_dir={run_dir}",
        ],
    )


def by_hand(lab: Lab, cfg, lrs, concurrent: int) -> float:
    t0 = time.perf_counter()
    for wave in range(0, len(lrs), concurrent):
        runs = []
        for i, lr in enumerate(lrs[wave : wave + concurrent], wave):
            c = cfg.model_copy(deep=True)
            c.policy.optim.lr = lr
            runs.append(lab.build(c, name=f"hand{i}"))
        for run in runs:
            run.start()
        for run in runs:
            run.wait()
            run.close()
    return time.perf_counter() - t0


def through_sweep(lab: Lab, cfg, lrs, name: str, concurrent: int) -> float:
    t0 = time.perf_counter()
    exp = lab.sweep(
        cfg, {"policy.optim.lr": list(lrs)}, stop={"iterations": cfg.train.iterations}, name=name,
        max_concurrent=concurrent,
    )  # fmt: skip
    exp.wait()
    elapsed = time.perf_counter() - t0
    assert set(exp.results_df()["iterations"]) == {cfg.train.iterations}
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--concurrent", type=int, help="runs / trials at a time (default: all)")
    parser.add_argument("--cpus", type=int, default=4, help="logical CPUs of the local runtime")
    args = parser.parse_args()
    lrs = [1e-3 * (i + 1) for i in range(args.trials)]
    concurrent = args.concurrent or args.trials
    lab = Lab.local(num_cpus=args.cpus)
    hand, sweep = [], []
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(tmp, args.iterations)
        for r in range(args.repeats):  # alternate the sides so a load change hits both
            hand.append(by_hand(lab, cfg, lrs, concurrent))
            sweep.append(through_sweep(lab, cfg, lrs, f"overhead{r}", concurrent))
    lab.shutdown()
    h, s = statistics.median(hand), statistics.median(sweep)
    load = os.getloadavg()
    data = {"trials": args.trials, "concurrent": concurrent, "iterations": args.iterations, "hand_s": hand}
    data.update({"sweep_s": sweep, "load_average_1_5_15": load})
    print(json.dumps(data))
    print(f"sweep / by hand wall-clock: {s / h:.2f} (median {s:.1f} s against {h:.1f} s; goal <= 1.1)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.report import save

    text = (
        "| trials (at a time) | iterations | repeats | by hand s (median; each) | through `lab.sweep` s (median; each) "
        "| sweep / by hand (goal <= 1.1) | load average (1, 5, 15 min) at the end |\n|---|---|---|---|---|---|---|\n"
        f"| {args.trials} ({concurrent}) | {args.iterations} | {args.repeats} "
        f"| {h:.1f}; {', '.join(f'{x:.1f}' for x in hand)} "
        f"| {s:.1f}; {', '.join(f'{x:.1f}' for x in sweep)} | {s / h:.2f} | {', '.join(f'{x:.1f}' for x in load)} |"
    )
    save(
        "sweep_overhead", "Sweep overhead: K trials through lab.sweep against the same K runs by hand", text, data=data
    )


if __name__ == "__main__":
    main()
