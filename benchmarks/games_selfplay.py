"""Self-play on a turn-based game to a win rate against random play: learner moves and time to get there.

Trains a preset (``tictactoe_selfplay``, ``connect4_selfplay``; PPO against a league of its own snapshots) one
iteration at a time; every ``--eval-every`` iterations the current policy plays ``--eval-games`` greedy games in
each seat against uniformly random play (`rlightning.selfplay.matches.play_match`, outside the timed part).
A seed is done when the goal holds (with ``--to-end`` it trains on to ``--max-iterations`` and the goal at
the last evaluation is reported too: what a test that trains the preset's whole run and then evaluates sees):

- ``both90`` (default): at least 90% wins in every seat (the connect four goal of issue 35);
- ``ttt``: at least 90% wins moving first and at most 10% losses moving second (the tic-tac-toe goal).

``--exact`` (tic-tac-toe) replaces the sampled games by the exact rates: every game against uniformly random
play enumerated (each random move weighted by one over the legal moves), no sampling error.

Reported per seed: the learner's env steps (one step is one learner move and the opponent's replies; the games
of all sub-envs together), the game moves of both sides, and the training time to the goal, as wall-clock and
as this process's CPU time (the run is in-process: ``cluster.inference: env_workers`` with one local env
worker). On a loaded machine the CPU time is the steadier figure. One torch thread. Evaluating does not change
the training (the evaluated copy is built under a forked torch generator): a seed trains as it would without
evaluations, as in a test of that seed.

    python benchmarks/games_selfplay.py --preset tictactoe_selfplay --goal ttt --seeds 0 1 2 --to-end \
        --max-iterations 200 --eval-every 20 --exact
    python benchmarks/games_selfplay.py --preset connect4_selfplay --seeds 0 1 2 --json c4.json
    python benchmarks/games_selfplay.py --preset connect4_selfplay --set policy.update_epochs=8 \
        --league random_share=0.75
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

GOALS = ("both90", "ttt")


def goal_met(goal: str, rates: Dict[str, Dict[str, float]], seats: List[str]) -> bool:
    """Whether the per-seat rates (``{seat: {win, draw, loss}}``) meet ``goal``."""
    if goal == "both90":
        return all(rates[s]["win"] >= 0.9 for s in seats)
    return rates[seats[0]]["win"] >= 0.9 and rates[seats[1]]["loss"] <= 0.1


TTT_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def exact_tictactoe_rates(player: Any, seat: str, mover: int) -> Dict[str, float]:
    """The exact win / draw / loss rates of a deterministic ``player`` in ``seat`` (``mover`` 1: it moves first,
    2: second) against uniformly random play in tic-tac-toe: every game enumerated, each random move weighted
    by one over the legal moves. The boards are PettingZoo's (square ``i`` is observation cell
    ``[i // 3, i % 3]``; plane 0 the player's marks, plane 1 the other side's); the player is asked once per
    position it reaches."""
    choice: Dict[tuple, int] = {}

    def move(board: tuple) -> int:
        if board not in choice:
            planes = np.zeros((1, 9, 2), dtype=np.int8)
            planes[0, :, 0] = [v == mover for v in board]
            planes[0, :, 1] = [v not in (0, mover) for v in board]
            mask = np.array([[v == 0 for v in board]], dtype=np.int8)
            obs = {"observation": planes.reshape(1, 3, 3, 2), "action_mask": mask}
            choice[board] = int(np.asarray(player.act(obs, seat=seat)).reshape(-1)[0])
        return choice[board]

    out = {"win": 0.0, "draw": 0.0, "loss": 0.0}
    stack = [((0,) * 9, 1.0, 1)]  # board (0 empty, 1 first mover, 2 second), probability, side to move
    while stack:
        board, prob, side = stack.pop()
        empty = [i for i, v in enumerate(board) if v == 0]
        if not empty:
            out["draw"] += prob
            continue
        moves = [move(board)] if side == mover else empty
        for m in moves:
            if board[m] != 0:
                raise RuntimeError(f"the player chose the taken square {m} on {board}")
            after = board[:m] + (side,) + board[m + 1 :]
            if any(all(after[i] == side for i in line) for line in TTT_LINES):
                out["win" if side == mover else "loss"] += prob / len(moves)
            else:
                stack.append((after, prob / len(moves), 3 - side))
    return out


def evaluate(parts: Any, games: int, seed: int, exact: bool = False) -> Dict[str, Dict[str, float]]:
    """Greedy games of the current policy against random play in each seat: rates per seat (``exact``: every
    tic-tac-toe game enumerated instead, `exact_tictactoe_rates`)."""
    import torch

    from rlightning.selfplay.matches import play_match
    from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent

    cfg = parts.engine.config
    meta = parts.engine.env_metas[0]
    # Building the evaluated copy draws its (overwritten) initial weights from torch's global generator, which
    # training draws its minibatches from: forked, the run trains as it would without evaluations (as the test).
    with torch.random.fork_rng(devices=[]):
        me = PolicyOpponent.from_weights(
            cfg.policy, meta, parts.policy_group.get_weights(), "learner", deterministic=True
        )
    out = {}
    for k, seat in enumerate(meta.action_space.spaces):
        if exact:
            out[str(seat)] = exact_tictactoe_rates(me, str(seat), k + 1)
            continue
        rng = np.random.default_rng(seed * 1000 + k)
        out[str(seat)] = play_match(cfg.env, me, RandomOpponent(rng), games, str(seat), seed=seed * 1000 + k).rates()
    return out


def run_seed(args: argparse.Namespace, seed: int) -> Dict[str, Any]:
    """Train one seed to the goal (or ``--max-iterations``); its figures."""
    import torch
    import yaml

    from rlightning.utils.builders import build_run
    from rlightning.utils.config import apply_overrides, load_preset

    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="games_selfplay_")
    cfg = apply_overrides(load_preset(args.preset), [f"log.run_dir={tmp}", f"seed={seed}", *args.set])
    cfg.env.env_kwargs["league_dir"] = str(Path(tmp) / "league")
    league = cfg.env.env_kwargs.setdefault("league", {})
    for item in args.league:
        key, value = item.split("=", 1)
        league[key] = yaml.safe_load(value)
    league["eval_games"] = 0  # this script evaluates, outside the clock
    parts = build_run(cfg)
    seats = [str(s) for s in parts.engine.env_metas[0].action_space.spaces]
    wall = cpu = 0.0
    curve: List[Dict[str, Any]] = []
    reached = None
    try:
        for it in range(1, args.max_iterations + 1):
            w, c = time.perf_counter(), time.process_time()
            parts.engine.step()
            wall += time.perf_counter() - w
            cpu += time.process_time() - c
            if it % args.eval_every:
                continue
            rates = evaluate(parts, args.eval_games, seed, exact=args.exact)
            point = {
                "iteration": it,
                "env_steps": int(parts.engine.env_steps),
                "wall_s": round(wall, 2),
                "cpu_s": round(cpu, 2),
                **{f"{s}/{k}": round(v, 4 if args.exact else 3) for s, r in rates.items() for k, v in r.items()},
            }
            curve.append(point)
            print(json.dumps(point), flush=True)
            point["goal"] = goal_met(args.goal, rates, seats)
            if point["goal"] and reached is None:
                reached = point
                if not args.to_end:
                    break
    finally:
        parts.engine.close()
    return {"seed": seed, "reached": reached, "last": curve[-1] if curve else None, "curve": curve}


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="connect4_selfplay")
    parser.add_argument("--goal", choices=GOALS, default="both90")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--eval-every", type=int, default=5, help="iterations between evaluations")
    parser.add_argument("--eval-games", type=int, default=100, help="greedy games per seat against random play")
    parser.add_argument("--max-iterations", type=int, default=400)
    parser.add_argument(
        "--exact",
        action="store_true",
        help="tic-tac-toe: the exact rates against random play (every game enumerated) instead of --eval-games games",
    )
    parser.add_argument(
        "--to-end",
        action="store_true",
        help="train all --max-iterations (the preset's run, as its test does) and report the goal at the end too",
    )
    parser.add_argument("--set", nargs="*", default=[], help="config overrides, key=value")
    parser.add_argument("--league", nargs="*", default=[], help="league settings (env_kwargs.league), key=value")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    results = []
    for seed in args.seeds:
        res = run_seed(args, seed)
        results.append(res)
        r = res["reached"]
        print(
            f"seed {seed}: "
            + (
                f"goal {args.goal} at iteration {r['iteration']}, {r['env_steps']} env steps, "
                f"{r['wall_s']} s wall, {r['cpu_s']} s CPU"
                if r
                else f"goal {args.goal} NOT reached in {args.max_iterations} iterations"
            ),
            flush=True,
        )
    done = [r["reached"] for r in results if r["reached"]]
    if done:
        med = {k: float(np.median([d[k] for d in done])) for k in ("env_steps", "wall_s", "cpu_s")}
        print(f"median over {len(done)}/{len(results)} seeds: {json.dumps(med)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "results": results}, indent=1))
    from benchmarks.report import save

    save(
        "games_selfplay" if args.goal == "both90" else "games_selfplay_ttt",  # README.md shows the newest of each
        f"{args.preset} self-play to goal {args.goal} against random play "
        + ("(greedy, exact: every game enumerated)" if args.exact else f"({args.eval_games} greedy games per seat)"),
        markdown_table(results, args),
        data={"args": vars(args), "results": results},
    )
    if args.to_end:
        at_end = [bool((r["last"] or {}).get("goal")) for r in results]
        print(f"goal {args.goal} at the end: {sum(at_end)}/{len(results)} seeds", flush=True)
        return 0 if all(at_end) else 1
    return 0 if len(done) == len(results) else 1


def markdown_table(results: List[Dict[str, Any]], args: argparse.Namespace) -> str:
    """One row per seed: where the goal was met (or the last evaluation), learner moves, CPU and wall seconds;
    with ``--to-end`` a second table of the last evaluation."""
    lines = _seed_table(results, lambda res: (res["reached"] or res["last"] or {}, bool(res["reached"])))
    if getattr(args, "to_end", False):
        lines += ["", "At the end of the run (`--to-end`):", ""]
        lines += _seed_table(results, lambda res: (res["last"] or {}, bool((res["last"] or {}).get("goal"))))
    return "\n".join(lines)


def _seed_table(results: List[Dict[str, Any]], pick: Any) -> List[str]:
    """The table's lines, a row per seed: ``pick(result)`` gives the evaluation point shown and whether the goal
    held there."""
    lines = [
        "| seed | goal met | iteration | learner moves | CPU s | wall s | rates per seat there |",
        "|---|---|---|---|---|---|---|",
    ]
    for res in results:
        p, met = pick(res)
        rates = ", ".join(f"{k} {v:.3f}" for k, v in p.items() if "/" in k and not k.endswith("/draw"))
        row = [res["seed"], "yes" if met else "no", p.get("iteration"), p.get("env_steps")]
        row += [p.get("cpu_s"), p.get("wall_s"), rates]
        lines.append("| " + " | ".join(str(x) for x in row) + " |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
