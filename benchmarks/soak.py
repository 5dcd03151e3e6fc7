"""Soak: a long PPO run on a local Ray runtime with a fault injected every minute, in turn (issue 33).

The faults, one per ``--interval`` seconds, cycling in this order:

- ``env_raise``: one env's ``step`` raises (the worker's env is recreated, counted in ``env_errors``);
- ``env_hang``: one env's ``step`` never returns (the worker is killed and recreated after
  ``env.step_timeout_s``, counted in ``env_timeouts``);
- ``env_kill``: one env worker's process is killed with SIGKILL (the worker is relaunched, ``env_restarts``);
- ``storage_kill``: the storage actor's process is killed with SIGKILL (a fresh shard replaces it,
  ``storage_restarts``; what it held of the iteration in progress is lost and reported);
- ``driver_kill``: the training process (``rlightning train``) is killed with SIGKILL, its Ray processes with
  it, and ``rlightning train --resume RUN_DIR`` continues from the newest complete checkpoint.

The env faults go through a control file the soak's env (`SoakCartPole`, CartPole with a fault hook) polls on
every step: the first env to rename it away performs the fault, so exactly one env fires each one. The storage
actor is found among the driver's descendant processes by its Ray process title (``ray::Storage``).

What it reports:

- faults survived: the run logged a new iteration after the fault, and the counter that fault raises went up
  (for a driver kill: the resumed driver logged an iteration);
- iterations lost: per driver kill, the last iteration the killed driver logged minus the iteration of the
  checkpoint the next driver resumed from (with ``train.checkpoint_interval=1``: at most 1; 0 when the
  checkpoint is ahead of the log: an iteration is saved before its metrics line is printed);
- data lost: completed iterations whose metrics row is missing from, or differs in the final checkpoint's
  history (every iteration 1..N once, each row as the driver logged it when it was checkpointed); and the
  transitions the storage kills took with them (the iteration in progress; PPO's buffer holds nothing older).

Run (from the repository root, the project's venv)::

    nice -n 10 python benchmarks/soak.py --minutes 30 --interval 60

It prints a table and saves it with every event (`benchmarks.report.save`:
``benchmarks/results/<date>-<time>-soak.json``); the run folder (checkpoints) and the drivers' logs go to
``--work`` (a temporary folder by default). Exit code 0 when every fault was survived and no completed
iteration's data was lost.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from gymnasium.envs.classic_control.cartpole import CartPoleEnv

ROOT = Path(__file__).resolve().parents[1]
ENTRY_POINT = "benchmarks.soak:SoakCartPole"
FAULTS = ["env_raise", "env_hang", "env_kill", "storage_kill", "driver_kill"]
#: The metrics counter each in-run fault raises.
COUNTER = {
    "env_raise": "env_errors",
    "env_hang": "env_timeouts",
    "env_kill": "env_restarts",
    "storage_kill": "storage_restarts",
}
ENV_ACTION = {"env_raise": "raise", "env_hang": "hang", "env_kill": "die"}
METRICS = "rlightning-metrics "


class SoakCartPole(CartPoleEnv):
    """CartPole whose ``step`` performs the fault written in ``<control_dir>/fault`` (``raise``, ``hang`` or
    ``die``), in the one env that claims the file first (an atomic rename)."""

    def __init__(self, control_dir: Optional[str] = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.control = None if control_dir is None else os.path.join(control_dir, "fault")

    def step(self, action: Any):
        if self.control is not None:
            claimed = f"{self.control}.{os.getpid()}.{time.monotonic_ns()}"
            try:
                os.rename(self.control, claimed)
            except FileNotFoundError:
                pass
            else:
                what = Path(claimed).read_text().strip()
                if what == "raise":
                    raise RuntimeError("soak: injected env error")
                if what == "hang":
                    while True:
                        time.sleep(3600)
                if what == "die":
                    os.kill(os.getpid(), signal.SIGKILL)
        return super().step(action)


def driver_config(work: Path, extra: List[str]) -> List[str]:
    """The soak run's ``rlightning train`` arguments: CartPole PPO, env workers and the storage on Ray."""
    return [
        "cartpole_ppo",
        f"env.name={ENTRY_POINT}",
        f"env.env_kwargs={{control_dir: {work / 'control'}}}",
        "env.max_episode_steps=500",
        "env.num_workers=2",
        "env.num_envs=4",
        "env.num_cpus=0.5",
        "env.step_timeout_s=10",
        "train.rollout_steps=64",
        "train.iterations=1000000",
        "train.target_return=null",
        "train.checkpoint_interval=1",
        "train.keep_checkpoints=3",
        "cluster.remote_env=true",
        "cluster.remote_storage=true",
        "cluster.remote_eval=false",
        "cluster.remote_train=false",
        "cluster.buffer_each_cpu_num=0.5",
        "cluster.num_cpus=4",
        "log.name=soak",
        "seed=1",
        f"--run-dir={work}",
        *extra,
    ]


# ---------------------------------------------------------------------------------------------- processes


def _children(pid: int) -> List[int]:
    out: List[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def descendants(pid: int) -> List[int]:
    """Every process below ``pid`` (its Ray runtime: GCS, raylet, workers)."""
    found, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ").strip()
    except OSError:
        return ""


def kill(pids: List[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Driver:
    """One ``rlightning train`` process; its metrics lines are collected as they come."""

    def __init__(self, args: List[str], log: Path, rows: List[Dict[str, Any]], segment: int) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        env.pop("RAY_ADDRESS", None)
        cmd = [sys.executable, "-m", "rlightning.cli", "train", *args, "--metrics-lines", "--quiet"]
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=self.log, text=True, start_new_session=True
        )
        self.segment = segment
        self.resumed_from: Optional[int] = None
        self.rows = rows
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            if line.startswith(METRICS):
                row = json.loads(line[len(METRICS) :])
                self.rows.append({"t": time.time(), "segment": self.segment, "row": row})
            elif line.startswith("resuming from "):
                self.resumed_from = int(line.rsplit("(iteration ", 1)[1].rstrip(")\n"))

    def kill(self) -> None:
        """SIGKILL the driver, then whatever of its Ray runtime outlives it."""
        below = descendants(self.proc.pid)
        kill([self.proc.pid])
        self.proc.wait()
        time.sleep(3.0)
        kill([p for p in below if cmdline(p)])
        self.reader.join(timeout=10)
        self.log.close()

    def stop(self, timeout: float = 120.0) -> None:
        """SIGTERM (the CLI closes its workers and releases Ray), SIGKILL if it does not end in time."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        self.reader.join(timeout=10)
        self.log.close()


# ---------------------------------------------------------------------------------------------- the soak


def latest(rows: List[Dict[str, Any]], segment: Optional[int] = None) -> Optional[Dict[str, Any]]:
    for entry in reversed(rows):
        if segment is None or entry["segment"] == segment:
            return entry
    return None


def inject(kind: str, driver: Driver, control: Path) -> str:
    """Start fault ``kind``; returns what was done, in words."""
    if kind in ENV_ACTION:
        for old in control.glob("fault*"):
            old.unlink()
        tmp = control / "fault.tmp"
        tmp.write_text(ENV_ACTION[kind])
        tmp.rename(control / "fault")
        return f"asked one env to {ENV_ACTION[kind]}"
    if kind == "storage_kill":
        storages = [p for p in descendants(driver.proc.pid) if cmdline(p).startswith("ray::Storage")]
        if not storages:
            return "no storage actor process found"
        kill(storages[:1])
        return f"killed storage actor pid {storages[0]}"
    raise ValueError(f"inject: unknown fault {kind!r}; expected one of {FAULTS}")


def soak(minutes: float, interval: float, work: Path, extra: List[str]) -> Dict[str, Any]:
    control = work / "control"
    control.mkdir(parents=True, exist_ok=True)
    run_dir = work / "soak"
    rows: List[Dict[str, Any]] = []
    faults: List[Dict[str, Any]] = []
    start = time.time()
    driver = Driver(driver_config(work, extra), work / "driver-0.log", rows, 0)
    while not rows and driver.proc.poll() is None and time.time() - start < 600:
        time.sleep(0.5)
    first_row_s = time.time() - start
    t0 = time.time()
    end = t0 + minutes * 60
    next_fault = t0 + interval
    n = 0
    while time.time() < end:
        time.sleep(max(0.0, min(next_fault, end) - time.time()))
        if time.time() >= end:
            break
        if driver.proc.poll() is not None:
            faults.append(
                {"kind": "driver_exit", "t": time.time() - t0, "at": time.time(), "rc": driver.proc.returncode}
            )
            break
        kind = FAULTS[n % len(FAULTS)]
        n += 1
        before = latest(rows, driver.segment)
        record_start = time.time()
        record: Dict[str, Any] = {"kind": kind, "t": round(record_start - t0, 1), "segment": driver.segment}
        record["iteration_before"] = before["row"]["iteration"] if before else None
        if kind == "driver_kill":
            driver.kill()
            record["rc"] = driver.proc.returncode
            segment = driver.segment + 1
            driver = Driver(["--resume", str(run_dir)], work / f"driver-{segment}.log", rows, segment)
            record["done"] = "SIGKILL of the driver and its Ray runtime; train --resume started"
            while latest(rows, segment) is None and driver.proc.poll() is None and time.time() < end:
                time.sleep(0.5)  # the next fault waits for the resumed driver's first iteration
            record["resume_s"] = round(time.time() - record_start, 1)
            next_fault = max(next_fault, time.time())
        else:
            counter = COUNTER[kind]
            record["counter_before"] = before["row"].get(counter, 0) if before else 0
            record["done"] = inject(kind, driver, control)
        record["at"] = time.time()
        faults.append(record)
        next_fault += interval
    driver.stop()
    total_s = time.time() - t0
    return evaluate(rows, faults, run_dir, {"minutes": total_s / 60, "first_iteration_s": first_row_s})


def evaluate(rows: List[Dict[str, Any]], faults: List[Dict[str, Any]], run_dir: Path, info: Dict[str, Any]):
    from rlightning.engine.checkpoint import FORMAT_VERSION, load_engine_files
    from rlightning.engine.checkpoint_store import newest_checkpoint

    for i, fault in enumerate(faults):
        until = faults[i + 1]["at"] if i + 1 < len(faults) else float("inf")
        if fault["kind"] == "driver_kill":
            after = [r for r in rows if r["segment"] == fault["segment"] + 1]
            killed = [r for r in rows if r["segment"] == fault["segment"]]
            last = killed[-1]["row"]["iteration"] if killed else 0
            resumed = after[0]["row"]["iteration"] - 1 if after else None
            fault["survived"] = bool(after)
            fault["last_logged"] = last
            fault["resumed_from"] = resumed
            # The metrics line of an iteration is printed after its checkpoint is written: a driver killed between
            # the two resumes one past its last line (nothing lost, counted as 0, noted as checkpoint_ahead).
            fault["iterations_lost"] = None if resumed is None else max(0, last - resumed)
            fault["checkpoint_ahead"] = None if resumed is None else max(0, resumed - last)
            continue
        if fault["kind"] not in COUNTER:
            fault["survived"] = False
            continue
        counter = COUNTER[fault["kind"]]
        after = [r for r in rows if r["segment"] == fault["segment"] and fault["at"] < r["t"] < until]
        fault["counter_after"] = after[-1]["row"].get(counter, 0) if after else None
        fault["iterations_after"] = len(after)
        fault["survived"] = bool(after) and after[-1]["row"].get(counter, 0) > fault["counter_before"]
    newest = newest_checkpoint(run_dir, FORMAT_VERSION)
    state, _ = load_engine_files(newest.path)
    history = {row["iteration"]: row for row in state["metrics"]}
    iterations = [row["iteration"] for row in state["metrics"]]
    complete = iterations == list(range(1, state["iteration"] + 1))
    # A logged row is a completed iteration's data when its iteration was checkpointed before its driver died:
    # the next driver resumed from it or later (the final driver: its newest checkpoint).
    resumed = {f["segment"]: f["resumed_from"] for f in faults if f["kind"] == "driver_kill"}
    kept = lost = 0
    for entry in rows:
        row = entry["row"]
        upto = resumed.get(entry["segment"], state["iteration"])
        if upto is None or row["iteration"] > upto:
            continue  # re-run after a resume: this row was the lost iteration's
        if history.get(row["iteration"]) == row:
            kept += 1
        else:
            lost += 1
    storage_lost = sum(int(x) for x in _lost_transitions(run_dir.parent))
    by_kind = {}
    for kind in FAULTS:
        of = [f for f in faults if f["kind"] == kind]
        by_kind[kind] = {"injected": len(of), "survived": sum(bool(f.get("survived")) for f in of)}
    lost_iters = [f["iterations_lost"] for f in faults if f["kind"] == "driver_kill"]
    return {
        **info,
        "iterations": state["iteration"],
        "env_steps": state["env_steps"],
        "faults": by_kind,
        "faults_survived": sum(v["survived"] for v in by_kind.values()),
        "faults_injected": sum(v["injected"] for v in by_kind.values()),
        "iterations_lost_per_driver_kill": lost_iters,
        "resume_s": [f.get("resume_s") for f in faults if f["kind"] == "driver_kill"],
        "history_complete": complete,
        "completed_rows_kept": kept,
        "completed_rows_lost": lost,
        "storage_kill_transitions_lost": storage_lost,
        "events": faults,
        "checkpoint": str(newest.path),
    }


def _lost_transitions(work: Path) -> List[int]:
    """The sizes the drivers' logs report for lost storage shards (transitions of the iteration in progress)."""
    out = []
    for log in sorted(work.glob("driver-*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if "storage shard" in line and "; lost " in line:
                word = line.split("; lost ", 1)[1].split()[0]
                if word.isdigit():
                    out.append(int(word))
    return out


TITLE = "Soak: a Ray PPO run with a fault every interval (env raise, hang, kill; storage kill; driver kill + resume)"


def markdown(report: Dict[str, Any]) -> str:
    """What the soak prints and saves: a table of the faults and the losses as text."""
    lines = [
        f"{report['minutes']:.1f} minutes, {report['iterations']} iterations, {report['env_steps']} env steps.",
        "",
        "| fault | injected | survived |",
        "|---|---|---|",
        *(f"| {kind} | {v['injected']} | {v['survived']} |" for kind, v in report["faults"].items()),
        "",
        f"Iterations lost per driver kill: {report['iterations_lost_per_driver_kill']}. Seconds from a driver kill "
        f"to the resumed driver's first iteration: {report['resume_s']}. Completed iterations' rows kept / lost: "
        f"{report['completed_rows_kept']} / {report['completed_rows_lost']}; history 1..N complete: "
        f"{report['history_complete']}. Transitions the killed storage actors held (the iteration in progress): "
        f"{report['storage_kill_transitions_lost']}.",
    ]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="length of the faulted part of the run")
    p.add_argument("--interval", type=float, default=60.0, help="seconds between faults")
    p.add_argument("--work", type=Path, default=None, help="folder for the run and the drivers' logs")
    p.add_argument("--set", action="append", default=[], help="extra config override key=value (repeatable)")
    args = p.parse_args(argv)
    work = args.work or Path(tempfile.mkdtemp(prefix="rl-soak-"))
    work.mkdir(parents=True, exist_ok=True)
    report = soak(args.minutes, args.interval, work, args.set)
    text = markdown(report)
    print(text)
    print(f"run folder and logs in {work}")
    sys.path.insert(0, str(ROOT))
    from benchmarks.report import save

    save("soak", TITLE, text, data=report)
    ok = report["faults_survived"] == report["faults_injected"] and not report["completed_rows_lost"]
    return 0 if ok and report["history_complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
