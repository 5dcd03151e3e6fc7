"""A separate Ray head started with `ray start --head` on 127.0.0.1, for tests of remote clusters."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, Optional

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def ray_head(
    num_cpus: int = 4, timeout_s: float = 180.0, info: Optional[dict] = None, attempts: int = 3
) -> Iterator[str]:
    """Start a head node in its own process group; yield its address; stop exactly that cluster.

    On a busy machine `ray start` can exceed Ray's fixed 30 s node startup window; that
    failure is retried (``attempts`` in all). ``info``, when given, receives ``session``:
    the session id every process of this cluster runs in.
    """
    for attempt in range(attempts):
        port = free_port()
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"rl-head-{port}.log"
        proc = _start_head(port, num_cpus, log)
        try:
            _wait_for_head(proc, log, timeout_s)
            break
        except RuntimeError as err:
            _stop_head(proc, log)
            if "timed out during startup" not in str(err) or attempt == attempts - 1:
                raise
    if info is not None:
        info["session"] = proc.pid
    try:
        yield f"127.0.0.1:{port}"
    finally:
        _stop_head(proc, log)


def _start_head(port: int, num_cpus: int, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.setdefault("RAY_agent_register_timeout_ms", "120000")
    with open(log, "w") as out:
        return subprocess.Popen(
            [
                RAY,
                "start",
                "--head",
                "--node-ip-address=127.0.0.1",
                f"--port={port}",
                f"--num-cpus={num_cpus}",
                "--include-dashboard=false",
                "--disable-usage-stats",
                "--block",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )


def _wait_for_head(proc: subprocess.Popen, log: Path, timeout_s: float) -> None:
    deadline = time.time() + timeout_s
    while "block forever" not in log.read_text():
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited with {proc.returncode}: {log.read_text()[-2000:]}")
        if time.time() > deadline:
            raise TimeoutError(f"ray head not up after {timeout_s}s: {log.read_text()[-2000:]}")
        time.sleep(0.5)


def _stop_head(proc: subprocess.Popen, log: Path) -> None:
    """Stop exactly this head: its whole process group (never `ray stop`, which stops every cluster)."""
    stop_process_group(proc)
    log.unlink(missing_ok=True)


def stop_process_group(proc: subprocess.Popen, grace_s: float = 5.0) -> None:
    """SIGTERM the process group ``proc`` leads (started with ``start_new_session``), SIGKILL what is left.

    A head's raylet and workers end within a second of SIGTERM, but its GCS server takes ~30 s more
    (and `ray start --block` waits for it): after ``grace_s`` the group is killed, then every process
    still in the session (one that left the group) too.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    for pid in session_pids(proc.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def session_pids(session: int) -> list:
    """Pids of the live processes of session ``session`` (zombies left out)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            # /proc/PID/stat: "pid (comm) state ppid pgrp session ..."; comm may hold spaces
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == session and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids


def token_file() -> str:
    """The token file `ray start --head` uses on this machine."""
    return str(Path.home() / ".ray" / "auth_token")


def alive_actor_classes() -> list:
    """Class names of the ALIVE actors of the cluster this driver is connected to (no dashboard needed)."""
    from ray._private import state

    return [a["ActorClassName"] for a in state.actors().values() if a.get("State") == "ALIVE"]


def kill_actor(actor, attempts: int = 300) -> None:
    """Kill a Ray actor mid-run and wait until Ray reports it dead (``ray.kill`` lands asynchronously)."""
    import ray

    ray.kill(actor, no_restart=True)
    for _ in range(attempts):
        try:
            ray.get(actor.__ray_ready__.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return
        time.sleep(0.1)
    raise AssertionError(f"actor {actor} still answers after ray.kill")
