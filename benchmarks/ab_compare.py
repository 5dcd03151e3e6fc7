"""B/A ratios of every figure of ``benchmarks/run`` JSON results from two trees (runs alternated A, B, A, B ...).

Each run of ``benchmarks/run --out <file>`` writes every side's figures (so does a results file that
``benchmarks/run`` writes without ``--out``); give the runs of tree A and of tree B (the same command on each
tree, in one sitting)::

    python benchmarks/ab_compare.py --a a1.json,a2.json --b b1.json,b2.json

For every (item, case, side) measured by both trees it prints a markdown row: each run's median, the median
over runs of each tree, and B/A of those medians, with ``better`` / ``worse`` read from the item's direction
(throughputs: higher is better; times: lower). ``--drop`` (default 0.05) marks a figure that got worse by more
than that fraction. The item's extra columns (a capped PPO run's env steps and final return, cold start's
phases) follow as ``side [extra]`` rows, marked ``(info)``: their direction depends on the run. Rows
``side / limit`` hold each run's ratio of rlightning's figure to the same run's limit (the best limit side),
whose B/A is steadier on a loaded machine than the raw figures'.

``--save "TITLE"`` also writes the table as the results file ``ab_compare`` (``--note``: the sitting, said
above the table: the trees, the order of the runs, the load); the runs' own files stay where they are.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness.report import ITEMS, fmt  # noqa: E402

Key = Tuple[str, str, str]


def medians(path: str) -> Dict[Key, Tuple[float, str]]:
    """(item, case, side) -> (median of the run's values, unit) for every measured figure of one run."""
    out = {}
    run = json.loads(Path(path).read_text())
    for m in run.get("data", run)["measurements"]:  # a results file keeps the run under "data"
        if m.get("values"):
            out[(m["item"], m["case"], m["side"])] = (statistics.median(m["values"]), m.get("unit") or "")
        cols = ITEMS[m["item"]].extra_cols if m["item"] in ITEMS else ()
        for col in cols:  # the item's extra columns (a capped PPO run's env steps, cold start's phases): info rows
            vals = [x for x in m.get("extras", {}).get(col, []) if isinstance(x, (int, float)) and x is not True]
            if vals and col not in ("solved", "capped"):
                out[(m["item"], m["case"], f"{m['side']} [{col}]")] = (statistics.median(vals), col)
    for (item, case, side), (value, _) in list(out.items()):  # ours / the same run's limit: load cancels partly
        sides = {x.key: x for x in ITEMS[item].sides} if item in ITEMS else {}
        limits = [out[(item, case, k)][0] for k, x in sides.items() if x.role == "limit" and (item, case, k) in out]
        if side in sides and sides[side].role in ("ours", "info") and limits:
            best = max(limits) if ITEMS[item].higher_is_better else min(limits)
            out[(item, case, f"{side} / {ITEMS[item].limit_label}")] = (value / best, "ratio")
    return out


def table(a_runs: List[str], b_runs: List[str], drop: float) -> str:
    a = [medians(p) for p in a_runs]
    b = [medians(p) for p in b_runs]
    keys = [k for k in a[0] if all(k in r for r in a + b)]
    head = "| item | case | side | unit | A runs | B runs | A | B | B/A | |"
    lines = [head, "|" + "---|" * 10]
    for key in keys:
        item, case, side = key
        av, bv = [r[key][0] for r in a], [r[key][0] for r in b]
        am, bm = statistics.median(av), statistics.median(bv)
        higher = ITEMS[item].higher_is_better if item in ITEMS else True
        change = bm / am if am else float("nan")
        worse = (1 - change) if higher else (change - 1)
        mark = f"worse by {worse:.0%}" if worse > drop else ("better" if worse < -drop else "")
        if side.endswith("]"):
            mark = "(info)"  # an extra: no direction
        row = [item, case, side, a[0][key][1], ", ".join(map(fmt, av)), ", ".join(map(fmt, bv))]
        row += [fmt(am), fmt(bm), f"{change:.2f}", mark]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="comma-separated JSON results of tree A")
    p.add_argument("--b", required=True, help="comma-separated JSON results of tree B")
    p.add_argument("--drop", type=float, default=0.05, help="mark figures worse by more than this fraction")
    p.add_argument("--save", default="", help="write the table as the results file ab_compare, with this title")
    p.add_argument("--note", default="", help="--save: the sitting (trees, order of the runs, load), as markdown")
    args = p.parse_args()
    a_runs, b_runs = args.a.split(","), args.b.split(",")
    text = table(a_runs, b_runs, args.drop)
    print(text)
    if args.save:
        from benchmarks import report

        def kept(path: str) -> dict:  # every figure of the run, not its command line (it names local paths)
            run = json.loads(Path(path).read_text())
            run = run.get("data", run)
            return {k: run[k] for k in ("date", "machine", "versions", "measurements") if k in run}

        runs = {"a": [kept(x) for x in a_runs], "b": [kept(x) for x in b_runs]}
        names = (
            ",".join(f"A{i + 1}.json" for i in range(len(a_runs))),
            ",".join(f"B{i + 1}.json" for i in range(len(b_runs))),
        )
        command = f"python benchmarks/ab_compare.py --a {names[0]} --b {names[1]}"
        report.save(
            "ab_compare", args.save, (args.note + "\n\n" if args.note else "") + text, data=runs, command=command
        )


if __name__ == "__main__":
    main()
