"""The peer of ``benchmarks/games_selfplay.py``: sb3-contrib's MaskablePPO on connect four, PettingZoo's tutorial setup.

PettingZoo's tutorial "SB3: Action Masked PPO for Connect Four" trains one MaskablePPO model on the AEC env
through a wrapper that turns it into a single-agent env whose every step is one move of whoever is to move
(the same model plays both sides, observing the board from the mover's side), with MaskablePPO's default
hyperparameters (``MaskableActorCriticPolicy``, n_steps 2048, batch 64, 10 epochs, lr 3e-4), and evaluates
against random play. This script rebuilds that setup (the wrapper's semantics: the reward and flags of the
agent that just moved, the observation of the next mover, the mask of the agent to move) and measures what
``games_selfplay.py`` measures: every ``--eval-every`` env steps, ``--eval-games`` greedy games per seat
against uniformly random play (outside the clock); a seed is done when it wins at least 90% in both seats.
Env steps here are game moves (both sides are the learner); the learner moves are about half of them.

Runs in its own venv, ``.bench/venvs/games`` (torch 2.13.0 CPU, sb3-contrib 2.9, pettingzoo[classic] 1.27):
started with another interpreter it creates the venv (``benchmarks/harness/venvs.py``) and runs itself there.

    python benchmarks/games_maskppo.py --seeds 0 1 2 --json maskppo.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]

try:
    import gymnasium as gym
    import numpy as np
    import torch
    from pettingzoo.classic import connect_four_v3
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
except ImportError:  # not the games venv: make it and run there
    if __name__ == "__main__":
        sys.path.insert(0, str(ROOT))
        from benchmarks.harness.venvs import ensure

        py = ensure("games")
        sys.exit(subprocess.call([str(py), __file__, *sys.argv[1:]]))
    raise


class MoverEnv(gym.Env):
    """A two-player AEC game as one env of the mover (the tutorial's ``SB3ActionMaskWrapper`` semantics)."""

    def __init__(self) -> None:
        self.game = connect_four_v3.env()
        self.game.reset()
        first = self.game.possible_agents[0]
        self.observation_space = self.game.observation_space(first)["observation"]
        self.action_space = self.game.action_space(first)

    def reset(self, seed: Any = None, options: Any = None):
        self.game.reset(seed=seed)
        return self.game.observe(self.game.agent_selection)["observation"], {}

    def step(self, action):
        mover = self.game.agent_selection
        self.game.step(int(action))
        obs = self.game.observe(self.game.agent_selection)["observation"]
        return (
            obs,
            float(self.game._cumulative_rewards[mover]),
            bool(self.game.terminations[mover]),
            bool(self.game.truncations[mover]),
            dict(self.game.infos[mover]),
        )

    def action_masks(self) -> np.ndarray:
        """The mover's legal moves (MaskablePPO asks the env for them each step)."""
        return self.game.observe(self.game.agent_selection)["action_mask"].astype(bool)


def evaluate(model: Any, games: int, seed: int) -> Dict[str, Dict[str, float]]:
    """Greedy games of ``model`` against uniformly random play in each seat: rates per seat."""
    rng = np.random.default_rng(seed)
    env = connect_four_v3.env()
    out = {}
    for k, seat in enumerate(env.possible_agents):
        counts = {"win": 0, "draw": 0, "loss": 0}
        for g in range(games):
            env.reset(seed=seed * 100_000 + k * games + g)
            for agent in env.agent_iter():
                obs, _, term, trunc, _ = env.last()
                if term or trunc:
                    if agent == seat:
                        r = env._cumulative_rewards[seat]
                        counts["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
                    env.step(None)
                    continue
                mask = obs["action_mask"].astype(bool)
                if agent == seat:
                    action, _ = model.predict(obs["observation"], action_masks=mask, deterministic=True)
                    env.step(int(action))
                else:
                    env.step(int(rng.choice(np.flatnonzero(mask))))
        out[seat] = {k2: v / games for k2, v in counts.items()}
    env.close()
    return out


def run_seed(args: argparse.Namespace, seed: int) -> Dict[str, Any]:
    """Train one seed to 90% wins in both seats (or ``--max-steps``); its figures."""
    torch.set_num_threads(1)
    env = MoverEnv()
    env.reset(seed=seed)
    model = MaskablePPO(MaskableActorCriticPolicy, env, verbose=0, seed=seed)
    model.set_random_seed(seed)
    wall = cpu = 0.0
    curve: List[Dict[str, Any]] = []
    reached = None
    while model.num_timesteps < args.max_steps:
        w, c = time.perf_counter(), time.process_time()
        model.learn(total_timesteps=args.eval_every, reset_num_timesteps=False)
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
        rates = evaluate(model, args.eval_games, seed)
        point = {
            "env_steps": int(model.num_timesteps),
            "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2),
            **{f"{s}/{k}": round(v, 3) for s, r in rates.items() for k, v in r.items()},
        }
        curve.append(point)
        print(json.dumps(point), flush=True)
        if all(r["win"] >= 0.9 for r in rates.values()):
            reached = point
            break
    return {"seed": seed, "reached": reached, "last": curve[-1] if curve else None, "curve": curve}


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-every", type=int, default=4096, help="env steps (moves) between evaluations")
    parser.add_argument("--eval-games", type=int, default=100, help="greedy games per seat against random play")
    parser.add_argument("--max-steps", type=int, default=400_000)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    import sb3_contrib

    print(json.dumps({"sb3_contrib": sb3_contrib.__version__, "torch": torch.__version__}), flush=True)
    results = []
    for seed in args.seeds:
        res = run_seed(args, seed)
        results.append(res)
        r = res["reached"]
        print(
            f"seed {seed}: "
            + (
                f"90% in both seats at {r['env_steps']} env steps, {r['wall_s']} s wall, {r['cpu_s']} s CPU"
                if r
                else f"90% in both seats NOT reached in {args.max_steps} env steps"
            ),
            flush=True,
        )
    done = [r["reached"] for r in results if r["reached"]]
    if done:
        med = {k: float(np.median([d[k] for d in done])) for k in ("env_steps", "wall_s", "cpu_s")}
        print(f"median over {len(done)}/{len(results)} seeds: {json.dumps(med)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    sys.path.insert(0, str(ROOT))
    from benchmarks.report import save

    lines = [
        "| seed | 90% in both seats | env steps (moves) | CPU s | wall s | wins per seat there |",
        "|---|---|---|---|---|---|",
    ]
    for res in results:
        p = res["reached"] or res["last"] or {}
        wins = ", ".join(f"{k} {v:.2f}" for k, v in p.items() if k.endswith("/win"))
        row = [
            res["seed"],
            "yes" if res["reached"] else "no",
            p.get("env_steps"),
            p.get("cpu_s"),
            p.get("wall_s"),
            wins,
        ]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    save(
        "games_maskppo",
        "sb3-contrib MaskablePPO on connect four (PettingZoo's tutorial setup) to 90% wins against random play",
        "\n".join(lines),
        data={"args": vars(args), "results": results},
    )
    return 0 if len(done) == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
