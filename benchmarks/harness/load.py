"""How busy the machine was during a measurement, from /proc (Linux).

A measurement's own processes (the harness and everything it started: the
side's interpreter, its Ray runtime and workers) are told apart from the rest
by parentage; what the rest used in CPU seconds over the measurement's wall
time is the "other" load. /proc/loadavg is recorded too (it counts our own
processes as well, so it is shown, not judged).
"""

from __future__ import annotations

import os
import time
from typing import Dict, Optional, Tuple

CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

# A measurement is quiet when other processes used less than this many cores on average.
QUIET_CORES = 0.25


def _processes() -> Dict[Tuple[int, int], Tuple[int, float]]:
    """(pid, start time) -> (ppid, cpu seconds) of every process now."""
    out: Dict[Tuple[int, int], Tuple[int, float]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read().decode(errors="replace")
        except OSError:
            continue  # gone meanwhile
        # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
        fields = raw[raw.rfind(")") + 2 :].split()
        ppid, utime, stime, start = int(fields[1]), int(fields[11]), int(fields[12]), int(fields[19])
        out[(int(name), start)] = (ppid, (utime + stime) / CLK)
    return out


def _descendants(procs: Dict[Tuple[int, int], Tuple[int, float]], root: int) -> set:
    children: Dict[int, list] = {}
    for (pid, _), (ppid, _) in procs.items():
        children.setdefault(ppid, []).append(pid)
    seen, todo = {root}, [root]
    while todo:
        for c in children.get(todo.pop(), []):
            if c not in seen:
                seen.add(c)
                todo.append(c)
    return seen


def loadavg() -> Optional[Tuple[float, float, float]]:
    try:
        with open("/proc/loadavg") as f:
            a, b, c = f.read().split()[:3]
        return float(a), float(b), float(c)
    except OSError:
        return None


class LoadProbe:
    """Snapshot before a measurement, ``finish()`` after: other processes' CPU use in between.

    Processes of our own tree are recognised at both snapshots, so a Ray worker
    that our side started and that is still running at the end is ours.
    """

    def __init__(self, root: Optional[int] = None) -> None:
        self.root = root or os.getpid()
        self.t0 = time.monotonic()
        self.load_before = loadavg()
        self.before = _processes()
        self.ours_before = _descendants(self.before, self.root)

    def finish(self) -> Dict[str, object]:
        wall = time.monotonic() - self.t0
        after = _processes()
        ours = self.ours_before | _descendants(after, self.root)
        other = 0.0
        for key, (_, cpu) in after.items():
            if key[0] in ours:
                continue
            other += cpu - self.before.get(key, (0, 0.0))[1]  # new processes count from zero
        cores = other / wall if wall > 0 else 0.0
        return {
            "wall_s": round(wall, 3),
            "loadavg_before": self.load_before,
            "loadavg_after": loadavg(),
            "other_cpu_s": round(other, 3),
            "other_cores": round(cores, 3),
            "quiet": cores < QUIET_CORES,
        }
