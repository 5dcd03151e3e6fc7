"""Offline RL beside d3rlpy: BC, CQL and IQL on the same locally collected datasets, 3 seeds each.

    python benchmarks/offline.py prepare                  # the Pendulum datasets, once (under .bench/data/offline/)
    python benchmarks/offline.py prepare_mujoco           # halfcheetah_medium (needs rlightning[mujoco]), once
    python benchmarks/offline.py run --steps 10000        # both libraries, every algorithm and seed; saves results
    python benchmarks/offline.py report runs.jsonl        # the table of runs recorded (run --log) in one or more calls

``prepare`` trains SAC on Pendulum (the ``pendulum_sac`` preset, seed 1) for 60 iterations (3,840 env steps),
writes its replay buffer as ``pendulum_medium_replay`` and collects ``pendulum_medium`` (20 episodes of that
policy's sampled actions); the expert reference is its deterministic return, the random one a random
policy's. ``prepare_mujoco`` stands in for Minari's ``mujoco/halfcheetah/medium-v0``, which cannot be downloaded
here: SAC on HalfCheetah-v5 for 100,000 env steps (about 6 minutes of a core), then 10 episodes of its sampled
actions as ``halfcheetah_medium`` (mean return 3,932, normalised 33.9 on D4RL's HalfCheetah references, random
-280.2 and expert 12,135; D4RL's halfcheetah-medium is about 40). The datasets stay out of git (``.bench/``);
d3rlpy's venv needs ``mujoco==4.0.0`` for the HalfCheetah evaluation. ``run`` trains every algorithm on every
dataset with both libraries, with the same hyperparameters (CORL's, CQL's actor at the paper's 1e-4, with the
networks and step counts given: 64x64 and 10,000 gradient steps by default, for the time a CPU has) and reports,
as ratios of rlightning to d3rlpy:

- the final normalised score (10 deterministic episodes), mean and std over the seeds;
- wall-clock per 10k gradient steps (rlightning: the offline engine's train and update_dataset phases;
  d3rlpy: ``fit``);
- dataset load time (rlightning: `rlightning.datasets.load` to a BufferView; d3rlpy: minari into an MDPDataset).

d3rlpy runs in its own venv, ``.bench/venvs/d3rlpy`` (``python -m venv .bench/venvs/d3rlpy``, then
``pip install torch==2.13.0``, then ``pip install d3rlpy==2.8.1 "minari[arrow]==0.5.4"``), one subprocess per
run (benchmarks/offline_d3rlpy.py). Both sides use one torch thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".bench" / "data" / "offline"
D3RLPY = ROOT / ".bench" / "venvs" / "d3rlpy" / "bin" / "python"
DATASETS = ("pendulum_medium", "pendulum_medium_replay", "halfcheetah_medium")
ALGOS = {
    # CORL's learning rates (BC 3e-4; IQL 3e-4 both; CQL critics 3e-4), but CQL's actor at the CQL paper's 1e-4:
    # CORL's 3e-5 (for 1M steps) moves the actor too little in the 10k steps a CPU run has (at 2,000 and 5,000
    # steps with 3e-5 neither library's CQL had left its initial policy)
    "bc": {"lr": 3e-4},
    "iql": {"lr": 3e-4, "q_lr": 3e-4},
    "cql": {"lr": 1e-4, "q_lr": 3e-4},
}


def prepare() -> None:
    from rlightning import datasets
    from rlightning.datasets.collect import collect_dataset
    from rlightning.policy.standalone import load_policy
    from rlightning.utils.builders import build_run
    from rlightning.utils.config import apply_overrides, load_preset

    DATA.mkdir(parents=True, exist_ok=True)
    cfg = apply_overrides(
        load_preset("pendulum_sac"),
        ["train.iterations=60", "train.learning_starts=256", "log.progress=false", f"log.run_dir={DATA}/runs"],
    )
    parts = build_run(cfg)
    try:
        parts.engine.run()
        ckpt = parts.engine.save()
        buffer_rows = parts.buffer.get_data()
    finally:
        parts.engine.close()
    policy = load_policy(ckpt)
    medium = collect_dataset(
        policy, cfg, DATA / "pendulum_medium", episodes=20, ref_max_score="policy", ref_episodes=10, overwrite=True
    )
    datasets.write(
        buffer_rows, DATA / "pendulum_medium_replay", env="Pendulum-v1", ref_min_score=medium.ref_min_score,
        ref_max_score=medium.ref_max_score, overwrite=True,
    )  # fmt: skip
    for name in ("pendulum_medium", "pendulum_medium_replay"):
        info = datasets.info(DATA / name)
        print(f"{name}: {info.total_episodes} episodes, {info.total_steps} steps, mean return {info.return_mean:.1f}, "
              f"random {info.ref_min_score:.1f}, expert {info.ref_max_score:.1f}")  # fmt: skip


# D4RL's reference returns for HalfCheetah (random, expert), which Minari's mujoco/halfcheetah datasets record too
HALFCHEETAH_REFS = (-280.178953, 12135.0)


def prepare_mujoco(env_steps: int) -> None:
    """``halfcheetah_medium``: Minari's mujoco/halfcheetah/medium-v0 cannot be downloaded here (the network reaches
    the package registries only), so an equivalent is collected: SAC (``pendulum_sac``'s settings on
    HalfCheetah-v5, 64x64 networks) trained for ``env_steps`` env steps, then 10 episodes (10,000 steps) of its
    sampled actions, with D4RL's reference returns."""
    from rlightning.datasets.collect import collect_dataset
    from rlightning.policy.standalone import load_policy
    from rlightning.utils.builders import build_run
    from rlightning.utils.config import apply_overrides, load_preset

    DATA.mkdir(parents=True, exist_ok=True)
    iterations = env_steps // 64  # 4 envs x 16 rollout steps per iteration
    cfg = apply_overrides(
        load_preset("pendulum_sac"),
        ["env.name=HalfCheetah-v5", f"train.iterations={iterations}", "train.learning_starts=1000",
         "train.target_return=null", "log.progress=false", f"log.run_dir={DATA}/runs"],
    )  # fmt: skip
    parts = build_run(cfg)
    try:
        parts.engine.run()
        ckpt = parts.engine.save()
    finally:
        parts.engine.close()
    info = collect_dataset(
        load_policy(ckpt), cfg, DATA / "halfcheetah_medium", episodes=10, ref_min_score=HALFCHEETAH_REFS[0],
        ref_max_score=HALFCHEETAH_REFS[1], overwrite=True,
        description=f"SAC on HalfCheetah-v5 after {iterations * 64} env steps, sampled actions (medium)",
    )  # fmt: skip
    print(f"halfcheetah_medium: {info.total_episodes} episodes, {info.total_steps} steps, mean return "
          f"{info.return_mean:.1f}, normalised {info.normalized_score(info.return_mean):.1f}")  # fmt: skip


def ours(algo: str, seed: int, dataset: Path, steps: int, hidden: list) -> dict:
    import torch

    from rlightning import datasets
    from rlightning.utils.builders import build_run
    from rlightning.utils.config import config_from_dict

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    view = datasets.load(dataset)
    load_s = time.perf_counter() - t0
    params = ALGOS[algo]
    policy = {"type": algo, "hidden_sizes": hidden, "activation": "relu", "optim": {"lr": params["lr"],
              "max_grad_norm": None}}  # fmt: skip
    if "q_lr" in params:
        policy["q_lr"] = params["q_lr"]
    if algo == "iql":
        policy["norm_obs"] = True
    updates = min(steps, 1000)
    cfg = config_from_dict(
        {
            "engine": "offline",
            "seed": seed,
            "env": {"name": datasets.info(dataset).env_id, "num_envs": 5},
            "policy": policy,
            "buffer": {"type": "replay", "capacity": max(len(view), 1000)},
            "train": {"dataset": str(dataset), "iterations": steps // updates, "updates_per_iteration": updates,
                      "batch_size": 256, "eval_interval": steps // updates, "eval_episodes": 10},
            "log": {"progress": False, "run_dir": str(DATA / "runs")},
        }
    )  # fmt: skip
    parts = build_run(cfg)
    try:
        history = parts.engine.run()
        records = parts.engine.timing.records
    finally:
        parts.engine.close()
    train_s = sum(r.get("train", 0.0) + r.get("update_dataset", 0.0) for r in records)
    return {"load_s": load_s, "train_s": train_s, "return_mean": history[-1]["eval_return_mean"], "steps": steps}


def theirs(algo: str, seed: int, dataset: Path, steps: int, hidden: list) -> dict:
    cmd = [str(D3RLPY), str(ROOT / "benchmarks" / "offline_d3rlpy.py"), "--algo", algo, "--seed", str(seed),
           "--dataset", str(dataset), "--steps", str(steps), "--hidden", ",".join(map(str, hidden)),
           "--params", json.dumps(ALGOS[algo])]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(out.stdout.strip().splitlines()[-1])


def run(steps: int, seeds: int, hidden: list, algos: list, names: list, log: Path, seed_from: int = 0) -> list:
    """Every run of both libraries; each result is also appended to ``log`` as a JSON line (a crash keeps them)."""
    from rlightning import datasets

    raw = []
    for name in names:
        info = datasets.info(DATA / name)
        for algo in algos:
            for seed in range(seed_from, seed_from + seeds):
                for lib, fn in (("rlightning", ours), ("d3rlpy", theirs)):
                    r = fn(algo, seed, DATA / name, steps, hidden)
                    r["score"] = float(info.normalized_score(r["return_mean"]))
                    raw.append({"dataset": name, "algo": algo, "seed": seed, "lib": lib, "hidden": hidden, **r})
                    with open(log, "a") as f:
                        f.write(json.dumps(raw[-1]) + "\n")
                    print(json.dumps(raw[-1]), flush=True)
    return raw


def table(raw: list) -> str:
    """The markdown table of `run`'s results: per dataset and algorithm, rlightning against d3rlpy."""
    rows, groups = [], {}
    for r in raw:
        groups.setdefault((r["dataset"], r["algo"], r["steps"]), {"rlightning": [], "d3rlpy": []})[r["lib"]].append(r)
    for (name, algo, steps), per in groups.items():
        a, b = per["rlightning"], per["d3rlpy"]
        if not a or not b:
            continue
        sa, sb = [r["score"] for r in a], [r["score"] for r in b]
        ta = np.mean([r["train_s"] / r["steps"] * 10_000 for r in a])
        tb = np.mean([r["train_s"] / r["steps"] * 10_000 for r in b])
        la, lb = np.mean([r["load_s"] for r in a]), np.mean([r["load_s"] for r in b])
        rows.append(
            f"| {name} | {algo.upper()} | {steps:,} | {len(a)} | {np.mean(sa):.1f} +- {np.std(sa):.1f} | "
            f"{np.mean(sb):.1f} +- {np.std(sb):.1f} | {'yes' if np.mean(sa) >= np.mean(sb) - np.std(sb) else 'no'} | "
            f"{ta:.0f} s | {tb:.0f} s | {ta / tb:.2f}x | {la * 1000:.0f} ms | {lb * 1000:.0f} ms | {la / lb:.2f}x |"
        )
    return "\n".join(
        [
            "| dataset | algorithm | gradient steps | seeds | rlightning score | d3rlpy score | within d3rlpy's mean - "
            "std | rlightning s / 10k steps | d3rlpy s / 10k steps | ratio | rlightning load | d3rlpy load | ratio |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
            *rows,
        ]
    )


def report(raw: list, note: str = "") -> None:
    hidden = raw[0].get("hidden", [64, 64])
    text = (
        f"Networks {hidden}, batch 256, one torch thread each; the gradient steps per row; normalised score over 10 "
        f"deterministic episodes (0 and 100: the dataset's random and expert reference returns).{note}\n\n"
        f"{table(raw)}\n"
    )
    print(text)
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from report import save

    save("offline", "Offline RL beside d3rlpy: normalised score, time per 10k gradient steps, dataset load", text,
         data=raw)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare")
    p = sub.add_parser("prepare_mujoco", help="halfcheetah_medium: SAC on HalfCheetah-v5, then its episodes")
    p.add_argument("--env-steps", type=int, default=100_000)
    p = sub.add_parser("run")
    p.add_argument("--steps", type=int, default=10_000)
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--seed-from", type=int, default=0, help="the first seed (to add seeds to a log)")
    p.add_argument("--hidden", default="64,64")
    p.add_argument("--algos", default="bc,cql,iql")
    p.add_argument("--datasets", default=",".join(DATASETS))
    p.add_argument("--log", default=str(DATA / "runs.jsonl"), help="JSON lines of every run (appended)")
    p = sub.add_parser("report", help="the table (and the results file) of the runs in a --log file")
    p.add_argument("log")
    p.add_argument("--note", default="")
    args = parser.parse_args()
    if args.cmd == "prepare":
        prepare()
    elif args.cmd == "prepare_mujoco":
        prepare_mujoco(args.env_steps)
    elif args.cmd == "run":
        raw = run(args.steps, args.seeds, [int(h) for h in args.hidden.split(",")], args.algos.split(","),
                  args.datasets.split(","), Path(args.log), args.seed_from)  # fmt: skip
        report(raw)
    else:
        report([json.loads(line) for line in Path(args.log).read_text().splitlines() if line.strip()], args.note)


if __name__ == "__main__":
    main()
