"""Learning reference table: each preset trained to its published budget, then 10 deterministic episodes.

For every preset: the mean and std of the deterministic evaluation return over 10 episodes after
``train.total_env_steps`` env steps, the env steps taken and the training wall-clock, beside the
published figure (rl-baselines3-zoo's benchmark.md, same algorithm, env and budget) and whether the
row is within the published mean minus one std. One torch thread, one process per run.

    python benchmarks/learning.py                                # every preset in the table
    python benchmarks/learning.py --presets cartpole_dqn --seeds 1 2
    python benchmarks/learning.py --json results.json
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from rlightning.utils.builders import build_run  # noqa: E402
from rlightning.utils.config import apply_overrides, load_preset  # noqa: E402

torch.set_num_threads(1)

#: preset -> (algorithm, env, published mean, published std, budget in env steps), rl-baselines3-zoo benchmark.md.
REFERENCE: Dict[str, tuple] = {
    "cartpole_dqn": ("DQN", "CartPole-v1", 500.0, 0.0, 50_000),
    "cartpole_rainbow": ("DQN (Rainbow-style)", "CartPole-v1", 500.0, 0.0, 50_000),  # against DQN's row
    "pendulum_td3": ("TD3", "Pendulum-v1", -151.855, 90.227, 20_000),
    "pendulum_sac": ("SAC", "Pendulum-v1", -156.995, 88.714, 20_000),
}


def run_preset(preset: str, seed: int, episodes: int = 10) -> Dict[str, Any]:
    """Train ``preset`` with ``seed`` to its budget; evaluate ``episodes`` deterministic episodes."""
    budget = REFERENCE[preset][4]
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = apply_overrides(
            load_preset(preset),
            [
                "log.progress=false",
                "log.jsonl=false",
                f"log.run_dir={run_dir}",
                f"seed={seed}",
                f"train.total_env_steps={budget}",
                "train.target_return=null",
                "train.iterations=1000000",
            ],
        )
        engine = build_run(cfg).engine
        try:
            t0 = time.perf_counter()
            engine.run()
            wall = time.perf_counter() - t0
            result = engine.evaluate(episodes)
        finally:
            engine.close()
    return {
        "preset": preset,
        "seed": seed,
        "return_mean": result["return_mean"],
        "return_std": result["return_std"],
        "env_steps": engine.env_steps,
        "wall_s": wall,
    }


def table(rows: List[Dict[str, Any]]) -> str:
    """A markdown table of the runs beside the published figures."""
    lines = [
        "| preset | algorithm | env | seed | eval return (10 ep) | env steps | wall s | published | within |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        algo, env, mean, std, _ = REFERENCE[r["preset"]]
        ok = r["return_mean"] >= mean - std - 1e-9
        lines.append(
            f"| {r['preset']} | {algo} | {env} | {r['seed']} | {r['return_mean']:.1f} +- {r['return_std']:.1f} "
            f"| {r['env_steps']} | {r['wall_s']:.0f} | {mean:g} +- {std:g} | {'yes' if ok else 'no'} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--presets", nargs="+", default=list(REFERENCE), choices=list(REFERENCE))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    for preset in args.presets:
        for seed in args.seeds:
            rows.append(run_preset(preset, seed, args.episodes))
            print(json.dumps(rows[-1]), flush=True)
    print(table(rows))
    if len(args.seeds) > 1:
        for preset in args.presets:
            means = [r["return_mean"] for r in rows if r["preset"] == preset]
            print(f"{preset}: mean over seeds {np.mean(means):.1f} +- {np.std(means):.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
