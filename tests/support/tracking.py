"""Test helpers for the experiment trackers: a real `mlflow server` on a loopback port, and W&B's offline
run files read back (the ``.wandb`` record log: W&B's protobuf records in LevelDB-style 32 KiB blocks)."""

from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List

#: MLflow's server otherwise starts its background job runner (several huey consumer processes, about a CPU
#: core while they start); tracking needs none of it.
_SERVER_ENV = {"MLFLOW_ALLOW_FILE_STORE": "false", "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """``mlflow server`` on 127.0.0.1 with a SQLite store under ``folder``; `wait` polls its /health."""

    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        folder.mkdir(parents=True, exist_ok=True)
        mlflow = Path(sys.executable).with_name("mlflow")
        self.log = open(folder / "server.log", "w")  # noqa: SIM115
        self.proc = subprocess.Popen(
            [str(mlflow), "server", "--host", "127.0.0.1", "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{folder / 'server.db'}",
             "--default-artifact-root", str(folder / "artifacts")],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **_SERVER_ENV},
        )  # fmt: skip

    def wait(self, timeout_s: float = 120.0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited with {self.proc.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as r:
                    if r.status == 200:
                        return self.uri
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"mlflow server not up at {self.uri} after {timeout_s}s; see {self.log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def _wandb_blocks(data: bytes) -> Iterator[bytes]:
    """The records of a ``.wandb`` file: a 7-byte header (``:W&B``, magic, version), then 32 KiB blocks of
    chunks, each with a 7-byte header (crc32, length, type: 1 full, 2 first, 3 middle, 4 last)."""
    if data[:4] != b":W&B":
        raise ValueError(f"not a W&B run file (starts {data[:7]!r})")
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:  # the block's tail is padding
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if kind == 0 and length == 0:
            break
        pending += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            yield pending
            pending = b""


def read_wandb_run(folder: Path) -> Dict[str, Any]:
    """The one offline W&B run under ``folder`` (``<run_dir>/wandb``): its run record and history rows."""
    from wandb.proto import wandb_internal_pb2

    files = [p for p in Path(folder).glob("wandb/offline-run-*/run-*.wandb")]
    if len(files) != 1:
        raise AssertionError(f"expected one offline W&B run under {folder}, found {files}")
    out: Dict[str, Any] = {"history": [], "config": {}}
    for raw in _wandb_blocks(files[0].read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        kind = record.WhichOneof("record_type")
        if kind == "run":
            out.update(group=record.run.run_group, name=record.run.display_name, project=record.run.project)
            out["config"].update({u.key: json.loads(u.value_json) for u in record.run.config.update})
        elif kind == "history":
            row = {i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in record.history.item}
            out["history"].append(row)
        elif kind == "exit":
            out["exit_code"] = record.exit.exit_code
    return out


def history_of(run: Dict[str, Any], key: str) -> List[float]:
    return [row[key] for row in run["history"] if key in row]
