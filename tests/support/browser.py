"""JupyterLab and headless Chromium for the browser test of the documentation notebooks.

`jupyter_lab(root)` starts JupyterLab on 127.0.0.1 with a random port and token, in its own
process group and with its own settings (no news fetching, no windowed notebook rendering so that
every cell stays in the page), and stops exactly that server. `find_chromium()` locates Debian's
``chromium`` (override with ``RLIGHTNING_CHROMIUM``); the test never downloads a browser.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, Iterator, List, NamedTuple, Optional

from tests.support.cluster import free_port

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]

# JupyterLab user settings for the test: no news or update checks, and every cell rendered in the
# page (the default windowing can leave cells far from the viewport out of the DOM).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


class LabServer(NamedTuple):
    """A running JupyterLab: its base URL, token and log file."""

    url: str
    token: str
    log: Path

    def api(self, path: str) -> Any:
        """GET a JSON endpoint of the server's REST API."""
        req = urllib.request.Request(f"{self.url}{path}", headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read().decode())

    def kernel_states(self) -> List[str]:
        """Execution states of the server's kernels (``idle``, ``busy``, ``starting``); empty while the server
        cannot list them yet.

        jupyter_server answers ``/api/kernels`` with a 500 when it is asked while a kernel is being started (the
        new kernel has no ``last_activity`` yet); the callers poll, so that answer counts as "no kernel yet".
        """
        try:
            kernels = self.api("/api/kernels")
        except urllib.error.HTTPError as err:
            if err.code >= 500:
                return []
            raise
        return [k.get("execution_state", "?") for k in kernels]

    def log_tail(self, n: int = 3000) -> str:
        """The end of the server's log, for failure messages."""
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else "(no log)"


def find_chromium() -> Optional[str]:
    """Path of a Chromium binary: ``$RLIGHTNING_CHROMIUM``, else ``chromium`` / ``chromium-browser`` on PATH."""
    explicit = os.environ.get("RLIGHTNING_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).exists() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _write_settings(folder: Path) -> None:
    for name, values in LAB_SETTINGS.items():
        plugin, file = name.rsplit("/", 1)
        target = folder / plugin / file
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(values))


@contextlib.contextmanager
def jupyter_lab(
    root: Path, work: Path, timeout_s: float = 180.0, env: Optional[Dict[str, str]] = None
) -> Iterator[LabServer]:
    """Start JupyterLab serving ``root``; yield a `LabServer`; stop the server and its kernels.

    Args:
        root: The folder the server shows (a temporary copy of the notebooks).
        work: A folder for the server's settings, workspaces, runtime files and log.
        timeout_s: How long to wait for the server to answer.
        env: Extra environment variables for the server (and so its kernels).
    """
    port = free_port()
    token = secrets.token_hex(16)
    settings = work / "settings"
    _write_settings(settings)
    log = work / "jupyterlab.log"
    child_env = dict(os.environ)
    child_env.pop("RAY_ADDRESS", None)
    child_env.update(
        JUPYTER_RUNTIME_DIR=str(work / "runtime"),
        JUPYTERLAB_WORKSPACES_DIR=str(work / "workspaces"),
        JUPYTERLAB_SETTINGS_DIR=str(settings),
        PYTHONUNBUFFERED="1",
    )
    child_env.update(env or {})
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.token={token}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={settings}",
        f"--LabApp.workspaces_dir={work / 'workspaces'}",
        "--ServerApp.allow_root=True",
    ]
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=child_env, cwd=root, start_new_session=True
        )
    server = LabServer(f"http://127.0.0.1:{port}", token, log)
    try:
        deadline = time.time() + timeout_s
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{server.log_tail()}")
            try:
                server.api("/api/status")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                if time.time() > deadline:
                    msg = f"JupyterLab did not answer within {timeout_s:.0f} s:\n{server.log_tail()}"
                    raise TimeoutError(msg) from None
                time.sleep(0.5)
        yield server
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def shorten_notebook(path: Path, replacements: Dict[str, str]) -> None:
    """Rewrite code cells of a notebook in place (each ``old -> new`` must occur once), outputs kept.

    Raises:
        ValueError: a replacement's text is not found exactly once (the notebook changed).
    """
    nb = json.loads(path.read_text())
    for old, new in replacements.items():
        hits = [c for c in nb["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
        if len(hits) != 1:
            raise ValueError(f"{path.name}: expected one code cell containing {old!r}, found {len(hits)}")
        cell = hits[0]
        cell["source"] = "".join(cell["source"]).replace(old, new)
    path.write_text(json.dumps(nb, indent=1))
