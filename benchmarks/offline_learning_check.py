"""IQL and CQL learn from a locally collected Pendulum "medium-replay" dataset, 3 seeds each: the recipe of CI's check.

    python benchmarks/offline_learning_check.py                  # runs it, prints the table, saves a results file
    python -m pytest tests/engine/test_offline_medium_replay.py  # the same runs as CI's pass/fail check (slow)

The dataset is D4RL's "medium-replay" made here: the replay buffer of a SAC run (the ``pendulum_sac`` preset,
seed 3) stopped after 120 iterations (7,200 env steps), while its policy is still mediocre: 36 episodes, mean
return about -790 (a random policy scores about -1,200, the preset's trained SAC about -150). IQL and CQL then
learn offline from it through the ``offline`` engine, 3 seeds each, 2,000 gradient steps, and every final policy
(10 deterministic episodes) must end above the dataset's own mean return. The published reference is D4RL's
medium-replay tasks, where CORL's IQL and CQL end well above the data's mean (hopper-medium-replay: IQL 94.7, CQL
97.4 normalised against the data's ~15).

The budgets are a CI-size search's (issue 34), smaller than the papers': IQL with 64x64 networks, batch 256,
Adam at 3e-3 for all three networks (CORL: 3e-4) and targets at tau 0.02 (0.005); CQL with 32x32 networks,
batch 128, ``cql_alpha`` 5 (CORL: 10), 4 sampled actions per group (10), actor at 1e-3 and critics at 3e-3
(3e-5 and 3e-4), tau 0.02. Measured (2026-12-04, the shared 2-core machine at a load average of 8 to 10, one
torch thread, in-process runs of the same updates): IQL -226 to -245 and CQL -240 to -244 over seeds 0-2, about
10 s and 13.5 s of CPU per seed; with 1,000 steps (or IQL at 32x32, batch 128) some seeds ended below the data's
mean. CI runs this recipe in ``tests/engine/test_offline_medium_replay.py`` (marked slow): about a minute,
the dataset's SAC run 20 s of it.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from rlightning import datasets
from rlightning.utils.builders import build_run
from rlightning.utils.config import apply_overrides, config_from_dict, load_preset

SAC_ITERATIONS, SAC_SEED = 120, 3  # 7,200 env steps of pendulum_sac
OFFLINE_STEPS = (4, 500)  # iterations x updates: 2,000 gradient steps
SEEDS = (0, 1, 2)
POLICIES = {
    "iql": (
        {"type": "iql", "hidden_sizes": [64, 64], "norm_obs": True, "optim": {"lr": 3e-3, "max_grad_norm": None},
         "q_lr": 3e-3, "tau": 0.02},
        256,
    ),
    "cql": (
        {"type": "cql", "hidden_sizes": [32, 32], "optim": {"lr": 1e-3, "max_grad_norm": None}, "q_lr": 3e-3,
         "tau": 0.02, "cql_alpha": 5.0, "cql_n_actions": 4},
        128,
    ),
}  # fmt: skip


def medium_replay(root: Path) -> datasets.DatasetInfo:
    """The SAC run's replay buffer as a Minari dataset under ``root``."""
    cfg = apply_overrides(
        load_preset("pendulum_sac"),
        [f"train.iterations={SAC_ITERATIONS}", "train.learning_starts=256", "log.progress=false",
         f"seed={SAC_SEED}", f"log.run_dir={root}"],
    )  # fmt: skip
    parts = build_run(cfg)
    try:
        parts.engine.run()
        return datasets.write(parts.buffer, root / "pendulum_medium_replay", env="Pendulum-v1", ref_episodes=0)
    finally:
        parts.engine.close()


def offline_run(dataset: Path, algo: str, seed: int, run_dir: Path) -> dict:
    """One offline run: its final deterministic return, wall clock and this process's CPU seconds."""
    policy, batch = POLICIES[algo]
    iterations, updates = OFFLINE_STEPS
    cfg = config_from_dict(
        {
            "engine": "offline",
            "seed": seed,
            "env": {"name": "Pendulum-v1", "num_envs": 5},
            "policy": {**policy, "activation": "relu"},
            "buffer": {"type": "replay", "capacity": 10_000},
            "train": {"dataset": str(dataset), "iterations": iterations, "updates_per_iteration": updates,
                      "batch_size": batch, "eval_interval": iterations, "eval_episodes": 10},
            "log": {"progress": False, "run_dir": str(run_dir)},
        }
    )  # fmt: skip
    wall, cpu = time.perf_counter(), time.process_time()
    parts = build_run(cfg)
    try:
        final = parts.engine.run()[-1]["eval_return_mean"]
    finally:
        parts.engine.close()
    return {"algo": algo, "seed": seed, "final": final, "wall_s": time.perf_counter() - wall,
            "cpu_s": time.process_time() - cpu}  # fmt: skip


def main() -> None:
    import os
    import tempfile

    root = Path(tempfile.mkdtemp(prefix="offline_check_"))
    wall = time.perf_counter()
    data = medium_replay(root)
    data_s = time.perf_counter() - wall
    runs = [offline_run(data.path, algo, seed, root) for algo in sorted(POLICIES) for seed in SEEDS]
    rows = []
    for algo in sorted(POLICIES):
        mine = [r for r in runs if r["algo"] == algo]
        finals = [r["final"] for r in mine]
        rows.append(
            f"| {algo.upper()} | {', '.join(f'{f:.0f}' for f in finals)} | {data.return_mean:.0f} | "
            f"{'yes' if min(finals) > data.return_mean else 'no'} | {sum(r['wall_s'] for r in mine):.0f} s | "
            f"{sum(r['cpu_s'] for r in mine):.0f} s |"
        )
    text = (
        f"Pendulum medium-replay: pendulum_sac's replay buffer after {data.total_steps} env steps "
        f"({data.total_episodes} episodes, mean return {data.return_mean:.0f}; made in {data_s:.0f} s wall clock). "
        f"{OFFLINE_STEPS[0] * OFFLINE_STEPS[1]} gradient steps per run through the offline engine, final return over "
        f"10 deterministic episodes, seeds {', '.join(map(str, SEEDS))}. Load average when done: "
        f"{os.getloadavg()[0]:.1f} (2 cores, shared).\n\n"
        "| algorithm | final returns | data mean | all above | wall clock, 3 runs | driver CPU, 3 runs |\n"
        "|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n"
    )  # fmt: skip
    print(text)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from report import save

    save("offline_learning_check", "IQL and CQL from a Pendulum medium-replay dataset at a CI-size budget", text,
         data={"dataset_steps": data.total_steps, "dataset_return_mean": data.return_mean, "runs": runs})  # fmt: skip


if __name__ == "__main__":
    main()
