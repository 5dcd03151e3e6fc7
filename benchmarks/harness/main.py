"""``benchmarks/run``: every side of every work item, each in a subprocess of its own venv; table + JSON.

benchmarks/run                     # everything (tens of minutes; PPO runs to solve)
benchmarks/run --quick             # sampling 1x8 and 2x64, short timings, small image buffer, no info
                                   # sides, no re-measurement, PPO once per side capped at 20 s; per Ray side one
                                   # process: cold start, then PPO on the same run, then sampling (< 5 minutes)
benchmarks/run --only sampling,buffer
benchmarks/run --only ppo --repeats 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from benchmarks.harness import venvs
from benchmarks.harness.load import QUIET_CORES, LoadProbe
from benchmarks.harness.report import (
    ITEMS,
    QUICK_SHARED,
    Item,
    Shared,
    Side,
    floor_summary,
    goal_summary,
    judge,
    markdown,
)

ROOT = venvs.ROOT
PEERS_DIR = ROOT / "benchmarks" / "peers"
THREADS = 1
#: Items whose fresh process ``r`` of a side trains seed ``1 + r`` (medians over seeds, not over timing noise).
SEEDED_ITEMS = ("ppo", "offpolicy")


def log(msg: str) -> None:
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def side_env() -> Dict[str, str]:
    env = dict(os.environ)
    env.update(
        OMP_NUM_THREADS=str(THREADS),
        MKL_NUM_THREADS=str(THREADS),
        PYTHONUNBUFFERED="1",
        BENCH_TMP=str(ROOT / ".bench" / "tmp"),
        RAY_agent_register_timeout_ms="120000",
    )
    env.pop("RAY_ADDRESS", None)  # every side starts (and stops) its own local Ray runtime
    env.pop("PYTHONPATH", None)
    return env


def launch(side: Side, cases: List[str], opts: List[str], timeout: float) -> Dict[str, dict]:
    """Run one side script once; returns case -> {values, unit, extras, load}."""
    cmd = [str(venvs.python_of(side.venv)), str(PEERS_DIR / side.script), *side.args, *opts]
    if cases:
        cmd += ["--cases", ",".join(cases)]
    if side.per_repeat_process:
        cmd += ["--t0", repr(time.time())]
    out: Dict[str, dict] = {}
    probe: Optional[LoadProbe] = None
    case = None
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=side_env(),
        cwd=PEERS_DIR,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    err_tail: List[str] = []

    def drain() -> None:  # keep stderr flowing (Ray and the peers are chatty) and keep its tail
        for line in proc.stderr:
            err_tail.append(line)
            del err_tail[:-30]

    t = threading.Thread(target=drain, daemon=True)
    t.start()
    timed_out = threading.Event()

    def watchdog() -> None:  # a hung side prints nothing: stop its whole process group at the deadline
        timed_out.set()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    timer = threading.Timer(timeout, watchdog)
    timer.start()
    try:
        for line in proc.stdout:
            if line.startswith("@@begin "):
                case = line[len("@@begin ") :].strip()
                probe = LoadProbe()
            elif line.startswith("@@result "):
                res = json.loads(line[len("@@result ") :])
                load = probe.finish() if probe else None
                res["load"] = load
                out[res.pop("case")] = res
                probe = None
        proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out.set()
    finally:
        timer.cancel()
        if timed_out.is_set():
            log(f"{side.label}: timed out after {timeout:.0f} s (case {case}); stopped")
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        t.join(timeout=5)
    if proc.returncode not in (0, None) and len(out) < max(1, len(cases)):
        log(f"{side.label}: exit {proc.returncode}; stderr tail:\n" + "".join(err_tail[-12:]))
    return out


def timing_opts(args: argparse.Namespace, per_repeat_process: bool, ppo: bool) -> List[str]:
    opts = ["--quick"] if args.quick else []
    opts += ["--repeats", str(1 if per_repeat_process else args.repeats), "--seconds", str(args.seconds)]
    return opts + (["--max-seconds", str(args.ppo_cap)] if ppo and args.ppo_cap else [])


def shared_in_use(args: argparse.Namespace, items: List[str], wanted_sides: List[str]) -> List[Shared]:
    """The shared processes of --quick whose every member is to be measured (else each side runs alone)."""
    if not args.quick or args.proc_repeats != 1:
        return []
    return [
        sh
        for sh in QUICK_SHARED
        if all(item in items and (not wanted_sides or key in wanted_sides) for item, key in sh.sides())
    ]


def measure_shared(sh: Shared, args: argparse.Namespace) -> Dict[tuple, Dict[str, dict]]:
    """Run one shared process; (item, side key) -> case -> result."""
    cases = list(ITEMS["sampling"].quick_cases) if sh.sampling else []
    side = Side("shared", f"{sh.script} {' '.join(sh.args)}", "ours", sh.venv, sh.script, sh.args, True)
    timeout = 420.0 + (args.ppo_cap or 600.0)
    got = launch(side, cases, timing_opts(args, False, True), timeout)
    out: Dict[tuple, Dict[str, dict]] = {key: {} for key in sh.sides()}
    for reported, (item, key, case) in sh.slots(cases).items():
        if reported in got:
            out[(item, key)][case] = got[reported]
    return out


def side_cases(item: Item, side: Side, args: argparse.Namespace) -> List[str]:
    """The cases ``side`` measures: the item's (``--quick``: its quick ones), those the side runs, ``--cases``."""
    cases = item.quick_cases if args.quick and item.quick_cases else item.cases
    wanted = [c for c in (getattr(args, "cases", "") or "").split(",") if c]
    return [c for c in cases if (not side.cases or c in side.cases) and (not wanted or c in wanted)]


def measure_side(item: Item, side: Side, args: argparse.Namespace, pre: Optional[Dict[str, dict]] = None) -> List[dict]:
    """All cases of one side, busy cases retried (at most ``--retries`` times); one measurement per case.

    ``pre``: the side's results from a shared process (--quick); nothing is launched or retried.
    """
    opts = timing_opts(args, side.per_repeat_process, item.name == "ppo")
    if item.name == "ppo":
        timeout = args.ppo_cap + 240.0 if args.ppo_cap else 1800.0
    elif item.name == "offpolicy":
        timeout = 3600.0
    else:
        timeout = 300.0 if args.quick else 900.0
    repeats = args.proc_repeats if side.per_repeat_process else 1
    cases = side_cases(item, side, args)
    best: Dict[str, dict] = {}
    attempts: Dict[str, List[dict]] = {c: [] for c in cases}
    if side.per_repeat_process:
        slots = [(f"{c}#{r}", c) for c in cases for r in range(repeats)]
    else:
        slots = [(c, c) for c in cases]
    todo = [s for s, _ in slots]
    for attempt in range(args.retries + 1):
        if not todo:
            break
        if pre is not None:
            got = {slot: dict(pre[case]) for slot, case in slots if slot in todo and case in pre}
        elif side.per_repeat_process:
            got = {}
            for slot in todo:
                case = dict(slots)[slot]
                # PPO: repeat r of every side trains seed 1 + r (a median over seeds, not over timing noise)
                seeded = item.name in SEEDED_ITEMS
                seed = ["--seed", str(1 + int(slot.rsplit("#", 1)[1]))] if seeded else []
                res = launch(side, [case] if len(item.cases) > 1 else [], opts + seed, timeout)
                if case in res:
                    got[slot] = res[case]
        else:
            got = launch(side, todo, opts, timeout)
        for slot, res in got.items():
            case = dict(slots)[slot]
            attempts[case].append({"attempt": attempt, "values": res["values"], "load": res["load"]})
            prev = best.get(slot)
            quiet = res["load"]["quiet"] if res.get("load") else True
            res["busy"] = not quiet
            if prev is None or (prev["busy"] and (quiet or res["load"]["other_cores"] < prev["load"]["other_cores"])):
                best[slot] = res
        todo = [s for s in todo if s not in best or best[s]["busy"]] if pre is None else []
        if todo and attempt < args.retries:
            log(f"{side.label}: machine busy during {todo}; measuring again ({attempt + 1}/{args.retries})")
    out = []
    for case in cases:
        got = [best[s] for s, c in slots if c == case and s in best]
        values = [v for r in got for v in r["values"]]
        extras: Dict[str, list] = {}
        for r in got:
            for k, v in r.items():
                if k not in ("values", "unit", "load", "busy"):
                    extras.setdefault(k, []).append(v)
        out.append(
            {
                "item": item.name,
                "case": case,
                "side": side.key,
                "label": side.label,
                "role": side.role,
                "unit": got[0]["unit"] if got else None,
                "values": values,
                "extras": extras,
                "busy": any(r["busy"] for r in got),
                "attempts": attempts[case],
            }
        )
    return out


def machine() -> Dict[str, object]:
    info: Dict[str, object] = {
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }
    try:
        with open("/proc/cpuinfo") as f:
            names = [ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")]
        info["cpu_model"] = names[0] if names else None
        with open("/proc/meminfo") as f:
            info["mem_gb"] = round(int(f.readline().split()[1]) / 1e6, 1)
    except OSError:
        pass
    try:
        info["gpu"] = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        info["gpu"] = None
    return info


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="benchmarks/run", description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="short timings, small image buffer, no re-measurement, PPO capped"
    )
    p.add_argument("--only", default="", help=f"comma-separated items: {','.join(ITEMS)}")
    p.add_argument("--sides", default="", help="comma-separated side keys (e.g. rl_ray,rllib); default all")
    p.add_argument("--cases", default="", help="comma-separated cases to measure (e.g. lunar); default all")
    p.add_argument("--repeats", type=int, default=None, help="timed repeats per case (in one process)")
    p.add_argument("--proc-repeats", type=int, default=None, help="fresh processes per case (cold start, PPO)")
    p.add_argument("--seconds", type=float, default=None, help="seconds per timed repeat (sampling)")
    p.add_argument("--retries", type=int, default=None, help="re-measurements of a case when the machine was busy")
    p.add_argument(
        "--ppo-cap", type=float, default=None, help="PPO: stop a side after this many seconds (quick: 20; 0: none)"
    )
    p.add_argument(
        "--out", default=None, help="JSON path (default: a results file, benchmarks/results/<date>-<time>-run.json)"
    )
    args = p.parse_args(argv)
    args.repeats = args.repeats or (3 if args.quick else 5)
    args.proc_repeats = args.proc_repeats or (1 if args.quick else 3)
    args.seconds = args.seconds or (0.5 if args.quick else 3.0)
    args.retries = args.retries if args.retries is not None else (0 if args.quick else 2)
    args.ppo_cap = args.ppo_cap if args.ppo_cap is not None else (20.0 if args.quick else 0.0)
    only = [x for x in args.only.split(",") if x]
    unknown = [x for x in only if x not in ITEMS]
    if unknown:
        p.error(f"unknown item(s) {unknown}; known: {','.join(ITEMS)}")
    items = only or [n for n, it in ITEMS.items() if it.quick_default or not args.quick]
    wanted_sides = [x for x in args.sides.split(",") if x]

    start = time.time()
    runs = [s for n in items for s in ITEMS[n].sides if not wanted_sides or s.key in wanted_sides]
    needed = sorted({s.venv for s in runs if s.venv != "ours"})  # a peer left out by --sides is not built
    for peer in needed:
        venvs.ensure(peer, log=log)
    versions = {name: venvs.versions(name) for name in ["ours", *needed]}
    for name, v in versions.items():
        log(f"{name}: " + ", ".join(f"{k} {x}" for k, x in v.items() if x))
    (ROOT / ".bench" / "tmp").mkdir(parents=True, exist_ok=True)

    measurements: List[dict] = []
    shared = shared_in_use(args, items, wanted_sides)
    shared_results: Dict[tuple, Dict[str, dict]] = {}
    for name in items:
        item = ITEMS[name]
        for side in item.sides:
            if wanted_sides and side.key not in wanted_sides:
                continue
            if (args.quick and side.full_only) or not side_cases(item, side, args):
                continue
            t0 = time.time()
            sh = next((sh for sh in shared if (name, side.key) in sh.sides()), None)
            if sh and (name, side.key) not in shared_results:
                log(f"{name}: {side.label}: shared process {sh.script} {' '.join(sh.args)} ...")
                shared_results.update(measure_shared(sh, args))
            pre = shared_results.get((name, side.key)) if sh else None
            if sh and not pre:
                log(f"{name}: {side.label}: nothing from the shared process; measuring it alone")
                pre = None
            log(f"{name}: {side.label} ...")
            ms = measure_side(item, side, args, pre)
            measurements += ms
            busy = [m["case"] for m in ms if m["busy"]]
            log(f"{name}: {side.label} done in {time.time() - t0:.0f} s" + (f" (busy: {busy})" if busy else ""))

    stamp = time.strftime("%Y-%m-%d %H:%M:%S")
    header = (
        f"rlightning benchmarks, {stamp}; machine: {os.cpu_count()} CPUs, "
        f"{'GPU' if machine().get('gpu') else 'no GPU'}; every process: torch.set_num_threads({THREADS}), "
        f"OMP_NUM_THREADS={THREADS}, MKL_NUM_THREADS={THREADS}; Ray sides: num_cpus=4 (logical)"
    )
    peers_line = "; ".join(
        f"{n}: " + ", ".join(f"{k} {x}" for k, x in v.items() if x and k != "python") for n, v in versions.items()
    )
    table = markdown(measurements, items)
    summary = goal_summary(measurements)
    floors = floor_summary(measurements, items)
    floors = f"\n### Ray floor (sampling)\n\n{floors}\n" if floors else ""
    mode = "--quick" if args.quick else "full"
    cap = (
        f"; PPO capped at {args.ppo_cap:g} s per side (an unsolved run's time is a lower bound)" if args.ppo_cap else ""
    )
    if args.quick:
        trimmed = [f"{n} cases {', '.join(ITEMS[n].quick_cases)}" for n in items if ITEMS[n].quick_cases]
        skipped = [s.label for n in items for s in ITEMS[n].sides if s.full_only]
        together = [
            f"{sh.script.removesuffix('.py')} = cold start, then PPO on the same run (timed from the built run), "
            "then "
            + ("sampling " + "/".join(k for _, k in sh.sampling) if sh.sampling else "nothing")
            + " on the same Ray runtime"
            for sh in shared
        ]
        cap += "; quick: " + "; ".join(
            trimmed
            + ([f"skipped: {', '.join(skipped)}"] if skipped else [])
            + ([f"one process (one Ray start) per side: {'; '.join(together)}"] if together else [])
        )
    text = (
        f"{header}\n\nversions: {peers_line}\n\nmode: {mode}, repeats {args.repeats} x {args.seconds:g} s "
        f"(in-process) / {args.proc_repeats} (fresh processes){cap}; a side marked (busy) saw other processes "
        f"use more than {QUIET_CORES} cores even after {args.retries} re-measurement(s)\n\n{table}{floors}"
        f"\n### Goals\n\n{summary}\n"
    )
    print(text)
    raw = {
        "date": stamp,
        "mode": mode,
        "argv": sys.argv[1:] if argv is None else argv,
        "threads": {"torch": THREADS, "OMP_NUM_THREADS": THREADS, "MKL_NUM_THREADS": THREADS},
        "machine": machine(),
        "versions": versions,
        "measurements": measurements,
        "goals": judge(measurements),
        "markdown": text,
        "seconds_total": round(time.time() - start, 1),
    }
    if args.out:  # a file of its own (an A/B run of another tree: benchmarks/ab_compare.py reads it)
        path = Path(args.out)
        path.write_text(json.dumps(raw, indent=1))
        log(f"results in {path}; {time.time() - start:.0f} s")
        return 0
    from benchmarks.report import save  # the results file README.md's current figures come from

    command = "benchmarks/run " + " ".join(sys.argv[1:] if argv is None else argv)
    save("run", f"rlightning beside its peers and limits ({mode})", text, data=raw, command=command.strip())
    log(f"{time.time() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
