"""ASHA against a grid on the same space, in one sitting: the best metric each finds and the env steps it spends.

The same K learning rates of CartPole PPO (log-spaced) run once as a plain grid, every trial to the stop
budget, and once under ASHA (``grace_period`` an eighth of the budget, ``reduction_factor`` 2), which stops
the worse trials at its rungs. The issue's goal: ASHA's best metric within 5% of the grid's, with at most
0.4x the grid's env steps. The metric is each trial's ``episode_return_mean`` at its last iteration.

    python benchmarks/sweep_asha.py --trials 27 --iterations 135 --grace 15 --rf 3 --low 1e-5 --high 3e-2 \
        --shuffle 0 --concurrent 4

That is successive halving's classic shape (27 trials, reduction factor 3, rungs at 15, 45 and 135 iterations).
The grace period must be where the metric already ranks the trials: CartPole's returns do after 15 iterations
(3,840 env steps), not after 5 (every learning rate 20 to 42), so rungs at 5 and 15 stop the best trial early.
The grid's per-iteration curves are saved beside the figures (``data.grid.curves``) to show that ranking.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.sweep_overhead import config  # noqa: E402 - the same small CartPole PPO run
from rlightning.notebook import Lab  # noqa: E402


def one(lab: Lab, cfg, lrs, asha: bool, iterations: int, name: str, grace: int, concurrent=None, rf=2) -> dict:
    options = {"max_concurrent": concurrent}
    if asha:
        options.update(scheduler="asha", scheduler_options={"grace_period": grace, "reduction_factor": rf})
    t0 = time.perf_counter()
    exp = lab.sweep(cfg, {"policy.optim.lr": list(lrs)}, stop={"iterations": iterations}, name=name, **options)
    df = exp.wait().results_df()
    best = df.loc[df["last"].idxmax()]
    return {
        "wall_s": time.perf_counter() - t0,
        "best": float(best["last"]),
        "best_lr": float(best["policy.optim.lr"]),
        "env_steps": int(df["env_steps"].sum()),
        "stopped_early": int((df["iterations"] < iterations).sum()),
        "trials": df[["policy.optim.lr", "iterations", "env_steps", "last"]].to_dict("records"),
        "curves": {
            str(exp.trials()[t]["params"]["policy.optim.lr"]): [float(v) for v in c["episode_return_mean"]]
            for t, c in exp.curves().items()
            if "episode_return_mean" in c
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--cpus", type=int, default=4, help="logical CPUs of the local runtime")
    parser.add_argument("--grace", type=int, help="ASHA's grace period in iterations (default: an eighth)")
    parser.add_argument("--concurrent", type=int, help="ASHA's trials at a time (default: as many as fit)")
    parser.add_argument("--rf", type=int, default=2, help="ASHA's reduction factor")
    parser.add_argument("--low", type=float, default=1e-4, help="the smallest learning rate")
    parser.add_argument("--high", type=float, default=3e-2, help="the largest learning rate")
    parser.add_argument("--shuffle", type=int, help="run the lrs in an order shuffled with this seed (default: rising)")
    args = parser.parse_args()
    lrs = np.geomspace(args.low, args.high, args.trials).round(7)
    if args.shuffle is not None:
        lrs = np.random.default_rng(args.shuffle).permutation(lrs)
    grace = args.grace or max(1, args.iterations // 8)
    lab = Lab.local(num_cpus=args.cpus, log_to_driver=False)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = config(tmp, args.iterations)
        cfg.cluster.remote_env = False  # one process per trial: the grid and ASHA pack the same way
        grid = one(lab, cfg, lrs, False, args.iterations, "grid", grace)
        asha = one(lab, cfg, lrs, True, args.iterations, "asha", grace, args.concurrent, args.rf)
    lab.shutdown()
    data = {"trials": args.trials, "iterations": args.iterations, "lrs": list(map(float, lrs)), "grid": grid}
    data.update(grace=grace, rf=args.rf, concurrent=args.concurrent, load_average_1_5_15=os.getloadavg())
    data["asha"] = asha
    print(json.dumps(data))
    ratio_best, ratio_steps = asha["best"] / grid["best"], asha["env_steps"] / grid["env_steps"]
    text = (
        "| side | best return (lr) | env steps | trials stopped early | wall s |\n|---|---|---|---|---|\n"
        + "".join(
            f"| {side} | {r['best']:.1f} ({r['best_lr']:.1e}) | {r['env_steps']} | {r['stopped_early']} "
            f"| {r['wall_s']:.0f} |\n"
            for side, r in (("grid", grid), ("ASHA", asha))
        )
        + f"| ASHA / grid (goal: best >= 0.95, env steps <= 0.4) | {ratio_best:.2f} | {ratio_steps:.2f} | | "
        f"{asha['wall_s'] / grid['wall_s']:.2f} |"
    )
    print(text)
    from benchmarks.report import save

    save("sweep_asha", "ASHA against a grid on the same learning rates (CartPole PPO)", text, data=data)


if __name__ == "__main__":
    main()
