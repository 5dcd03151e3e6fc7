"""Learning reference table: each row trained to its published budget, then 10 deterministic episodes.

For every row of `ROWS`: the mean and std of the deterministic evaluation return over 10 episodes after
the row's budget of env steps, the env steps taken and the training wall-clock, beside the published
figure (rl-baselines3-zoo's benchmark.md unless the row names another source) and beside
Stable-Baselines3 trained here, in the same sitting, with rl-baselines3-zoo's hyperparameters for the
same algorithm, env and budget (``benchmarks/peers/sb3_learning.py``, run in its own venv
``.bench/venvs/sb3``). A row is within when its evaluation mean is at least the published mean minus
one std. Ratios: rlightning / published mean (sign-aware: 1.0 or more is as good or better), and
rlightning / SB3 wall-clock. One torch thread per process; one process per run.

    python benchmarks/learning.py                                    # every row, seed 1, with SB3
    python benchmarks/learning.py --rows cartpole_dqn --seeds 1 2 3  # medians over the seeds
    python benchmarks/learning.py --rows pendulum_td3 --no-sb3 --json results.json

Adding a row: one `Row` in `ROWS` (the preset, the budget, the published figure and its source,
optionally the SB3 case of ``peers/sb3_learning.py`` and config overrides that make the preset match
the reference's settings).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ZOO = "rl-baselines3-zoo benchmark.md"


@dataclass(frozen=True)
class Row:
    """One line of the reference table.

    Attributes:
        preset: The rlightning preset trained.
        algorithm: The algorithm as the reference names it.
        env: The env id.
        budget: Env steps to train (the reference's ``n_timesteps``).
        mean: Published mean evaluation return.
        std: Published std.
        source: Where the published figure comes from.
        sb3: The case of ``peers/sb3_learning.py`` that trains SB3 on the same budget (None: no SB3 side).
        overrides: Config overrides applied to the preset (``key=value``, as on the command line).
    """

    preset: str
    algorithm: str
    env: str
    budget: int
    mean: float
    std: float
    source: str = ZOO
    sb3: Optional[str] = None
    overrides: Tuple[str, ...] = ()


#: name -> row. The name is the preset unless one preset serves two rows.
ROWS: Dict[str, Row] = {
    "cartpole_dqn": Row("cartpole_dqn", "DQN", "CartPole-v1", 50_000, 500.0, 0.0, sb3="dqn_cartpole"),
    "cartpole_rainbow": Row("cartpole_rainbow", "DQN (Rainbow-style; DQN's row)", "CartPole-v1", 50_000, 500.0, 0.0),
    "acrobot_dqn": Row("acrobot_dqn", "DQN", "Acrobot-v1", 100_000, -76.639, 11.752, sb3="dqn_acrobot"),
    "pendulum_sac": Row("pendulum_sac", "SAC", "Pendulum-v1", 20_000, -156.995, 88.714, sb3="sac_pendulum"),
    "pendulum_td3": Row("pendulum_td3", "TD3", "Pendulum-v1", 20_000, -151.855, 90.227, sb3="td3_pendulum"),
    # rl-baselines3-zoo's RecurrentPPO (ppo_lstm) on CartPoleNoVel-v1 (CartPole with the velocities masked, as
    # lstm_ppo's mask_velocity wrapper does) at 100k: 500 +- 0 (the sb3 organisation's published model).
    # The zoo's network: an LSTM of 64 for the actor and one for the critic, a 64-unit layer after each; the
    # learning rate annealed to 0 over the budget, as the zoo's lin_ schedule. (The preset keeps a shared
    # LSTM of 32 and a constant rate: it learns the CI test's bar in a third of the time.)
    "lstm_ppo": Row(
        "lstm_ppo",
        "PPO (LSTM)",
        "CartPole-v1, velocities masked",
        100_000,
        500.0,
        0.0,
        overrides=(
            "policy.optim.anneal_lr=true",
            "policy.recurrent_size=64",
            "policy.recurrent_shared=false",
            "policy.hidden_sizes=[64]",
        ),
    ),
    "mountaincar_sac": Row(
        "mountaincar_sac", "SAC (gSDE)", "MountainCarContinuous-v0", 50_000, 94.679, 1.134, sb3="sac_mountaincar"
    ),
    "lunar_ppo": Row("lunar_ppo", "PPO", "LunarLander-v3", 1_000_000, 242.119, 31.823, sb3="ppo_lunar"),
    # CleanRL documents ppo_continuous_action.py (the preset's settings) on HalfCheetah-v4 at 1M steps: 1442.64 +-
    # 46.03 (its training episodes' return at the end, over seeds; the raw reward, counted before the reward
    # normalisation, as the preset's episode returns are). The preset runs HalfCheetah-v5, gymnasium's current
    # version of the same task.
    "mujoco_ppo": Row(
        "mujoco_ppo",
        "PPO",
        "HalfCheetah-v5",
        1_000_000,
        1442.64,
        46.03,
        source="CleanRL ppo_continuous_action (HalfCheetah-v4)",
    ),
    # SAC on HalfCheetah at 1M env steps: rl-baselines3-zoo documents 9535.45 +- 100.47 (HalfCheetah-v3, the zoo's
    # SAC settings: learning_starts 10000, one learning rate of 3e-4, the actor every update). The preset runs
    # CleanRL's settings (critic lr 1e-3, the actor every 2 updates, learning_starts 5000) on HalfCheetah-v5.
    # Seed 1 (2026-12-03, bfloat16 products): 10562.2 +- 100.9 in 6585 s on one core.
    "mujoco_sac": Row(
        "mujoco_sac",
        "SAC",
        "HalfCheetah-v5",
        1_000_000,
        9535.451,
        100.470,
        source="rl-baselines3-zoo benchmark.md (SAC, HalfCheetah-v3, its own settings)",
    ),
    # The MinAtar paper's DQN (Young & Tian 2019) on MinAtar Breakout, the preset's settings over the first 200k
    # of its 5M frames (epsilon reaches 0.1 at 100k). No published figure at this budget: the paper gives learning
    # curves over 5M frames only, so the row's bar is random play, 0.435 +- 0.70 (200 episodes, seeds 0-199).
    "minatar_dqn": Row(
        "minatar_dqn",
        "DQN (MinAtar paper's)",
        "MinAtar/Breakout-v1",
        200_000,
        0.435,
        0.0,
        source="none at this budget; bar: random play",
    ),
    # minatar_ppo's 500 iterations (512k env steps). No published PPO figure for MinAtar Breakout at this budget
    # (the MinAtar paper's curves are DQN and actor-critic over 5M frames), so the bar is random play, as
    # minatar_dqn's.
    "minatar_ppo": Row(
        "minatar_ppo",
        "PPO (MinAtar paper's CNN)",
        "MinAtar/Breakout-v1",
        512_000,
        0.435,
        0.0,
        source="none at this budget; bar: random play",
    ),
    # PPO with one policy shared by the 3 agents of MPE simple_spread (the team's return, summed over agents), the
    # preset's 1500 iterations of 8 envs x 50 steps. No published figure for this budget and return: the bar is
    # random play, -81.30 +- 24.94 (400 episodes, uniform actions, seed 0).
    "mpe_ppo": Row(
        "mpe_ppo",
        "PPO, parameters shared by all agents",
        "mpe2:simple_spread_v3",
        600_000,
        -81.30,
        0.0,
        source="none at this budget; bar: random play",
    ),
    # minatar_ppo's budget (512k env steps) with APPO's asynchronous actors and V-trace. No published APPO figure
    # for MinAtar Breakout: the bar is random play, as minatar_ppo's.
    "minatar_appo": Row(
        "minatar_appo",
        "APPO (MinAtar paper's CNN)",
        "MinAtar/Breakout-v1",
        512_000,
        0.435,
        0.0,
        source="none at this budget; bar: random play",
    ),
    # No published APPO CartPole budget to match: the row is the bar (solved, 475) at 100k env steps.
    # The learning rate annealed to 0 over the budget (seeds 1-3: 500, 500, 430.9; constant: 235.1, 500, 454.0).
    "cartpole_appo": Row(
        "cartpole_appo",
        "APPO",
        "CartPole-v1",
        100_000,
        475.0,
        0.0,
        source="solved (475)",
        overrides=("policy.optim.anneal_lr=true",),
    ),
}


def run_row(name: str, seed: int, episodes: int = 10, extra: Sequence[str] = ()) -> Dict[str, Any]:
    """Train row ``name``'s preset with ``seed`` to its budget; evaluate ``episodes`` deterministic episodes.

    ``extra``: more config overrides (``key=value``), after the row's own.
    """
    import torch

    from rlightning.utils.builders import build_run
    from rlightning.utils.config import apply_overrides, load_preset

    torch.set_num_threads(1)
    row = ROWS[name]
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = apply_overrides(
            load_preset(row.preset),
            [
                "log.progress=false",
                "log.jsonl=false",
                f"log.run_dir={run_dir}",
                f"seed={seed}",
                f"train.total_env_steps={row.budget}",
                "train.target_return=null",
                "train.iterations=1000000",
                *row.overrides,
                *extra,
            ],
        )
        cl = cfg.cluster
        remote = cl.remote_env or cl.remote_eval or cl.remote_train or cl.remote_storage
        if remote:  # a preset with Ray actors (lunar_ppo's env workers): a local runtime, not timed
            from rlightning.utils.ray.runtime import acquire_ray, release_ray

            acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
        try:
            engine = build_run(cfg).engine
            try:
                t0 = time.perf_counter()
                engine.run()
                wall = time.perf_counter() - t0
                result = engine.evaluate(episodes)
            finally:
                engine.close()
        finally:
            if remote:
                release_ray()
    return {
        "row": name,
        "side": "rlightning",
        "seed": seed,
        "return_mean": float(result["return_mean"]),
        "return_std": float(result["return_std"]),
        "env_steps": int(engine.env_steps),
        "wall_s": wall,
        **({"overrides": list(extra)} if extra else {}),
    }


def run_sb3(name: str, seed: int, episodes: int = 10) -> Optional[Dict[str, Any]]:
    """The SB3 side of row ``name`` in its own venv (created on first use); None when the row has none."""
    row = ROWS[name]
    if row.sb3 is None:
        return None
    sys.path.insert(0, str(ROOT))
    from benchmarks.harness import venvs

    py = venvs.ensure("sb3")
    script = ROOT / "benchmarks" / "peers" / "sb3_learning.py"
    cmd = [str(py), str(script), "--cases", row.sb3, "--seed", str(seed), "--episodes", str(episodes)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, cwd=script.parent).stdout
    res = next(json.loads(line[len("@@result ") :]) for line in out.splitlines() if line.startswith("@@result "))
    return {
        "row": name,
        "side": "sb3",
        "seed": seed,
        "return_mean": res["return_mean"],
        "return_std": res["return_std"],
        "env_steps": res["env_steps"],
        "wall_s": res["values"][0],
        "sb3": res.get("sb3"),
    }


def score_ratio(value: float, published: float) -> float:
    """value / published for positive references, published / value for negative ones (1.0+: as good or better)."""
    if published > 0:
        return value / published
    return published / value if value < 0 else float("inf")


def within(row: Row, value: float) -> bool:
    """The row's evaluation mean is at least the published mean minus one std."""
    return value >= row.mean - row.std - 1e-9


def _median(runs: Sequence[Dict[str, Any]], key: str) -> float:
    return float(np.median([r[key] for r in runs]))


def table(runs: List[Dict[str, Any]]) -> str:
    """A markdown table: per row, medians over seeds of each side, beside the published figure."""
    lines = [
        "| row | algorithm | env | budget | seeds | rlightning eval (median; per seed) | SB3 eval (median; per seed) "
        "| published | rl / published | within | rl wall s | SB3 wall s | rl / SB3 wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(r["row"] for r in runs):
        row = ROWS[name]
        ours = [r for r in runs if r["row"] == name and r["side"] == "rlightning"]
        sb3 = [r for r in runs if r["row"] == name and r["side"] == "sb3"]
        if not ours:
            continue
        m = _median(ours, "return_mean")
        per = ", ".join(f"{r['return_mean']:.1f}" for r in ours)
        sb3_per = ", ".join(f"{r['return_mean']:.1f}" for r in sb3)
        sb3_eval = f"{_median(sb3, 'return_mean'):.1f}; {sb3_per}" if sb3 else "-"
        w_ours = _median(ours, "wall_s")
        w_sb3 = f"{_median(sb3, 'wall_s'):.0f}" if sb3 else "-"
        wall_ratio = f"{w_ours / _median(sb3, 'wall_s'):.2f}x" if sb3 else "-"
        lines.append(
            f"| {name} | {row.algorithm} | {row.env} | {row.budget // 1000}k | {len(ours)} | {m:.1f}; {per} "
            f"| {sb3_eval} | {row.mean:g} +- {row.std:g} | {score_ratio(m, row.mean):.2f} "
            f"| {'yes' if within(row, m) else 'no'} | {w_ours:.0f} | {w_sb3} | {wall_ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", "--presets", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--no-sb3", action="store_true", help="rlightning only (no SB3 side)")
    parser.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="config overrides for every row")
    parser.add_argument("--json", default=None, help="also write every run to this file")
    args = parser.parse_args()
    runs: List[Dict[str, Any]] = []
    for name in args.rows:
        for seed in args.seeds:  # the two sides of a seed one after the other: same sitting, same load
            runs.append(run_row(name, seed, args.episodes, args.set))
            print(json.dumps(runs[-1]), flush=True)
            if not args.no_sb3:
                res = run_sb3(name, seed, args.episodes)
                if res is not None:
                    runs.append(res)
                    print(json.dumps(res), flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (2-core machine: other jobs inflate wall-clock)")
    text = table(runs)
    print(text)
    sys.path.insert(0, str(ROOT))
    from benchmarks.report import save

    save(
        "learning",
        "Learning rows: evaluation after the published budget, beside the published figure and SB3",
        text,
        data=runs,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)


if __name__ == "__main__":
    main()
