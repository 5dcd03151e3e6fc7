"""`Lab.launch` for real: Ray's cluster launcher, on-prem ``local`` provider, head = this machine over SSH.

The test makes a key and an sshd on a free loopback port with its own config, reached through
``auth.ssh_proxy_command`` (``nc``; Ray's ``auth`` has no port setting). The interpreter lives where
only root may run it, so the SSH user is root, with ``HOME`` set by sshd (``SetEnv``) to a fresh folder:
the launcher's files land there, and its ``~/.bashrc`` puts a ``ray`` first on the PATH whose ``stop``
(what ``ray down`` runs on the head) stops only the processes of this test's cluster (its own
``--temp-dir``), never another Ray on this machine; everything else goes to the real ``ray``. A driver
in a fresh interpreter launches, trains two iterations, re-launches (the cluster is reused), and tears
down; the test checks that no process of that cluster is left, and removes sshd and the files.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SSHD = "/usr/sbin/sshd"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

STOP_SCRIPT = """
import os, signal, sys, time
import psutil
mark = sys.argv[1]
def mine():
    out = []
    for p in psutil.process_iter(["cmdline", "name"]):
        try:
            name, cmd = p.info["name"], " ".join(p.info["cmdline"] or [])
            if p.pid != os.getpid() and name not in ("ssh", "sshd") and mark in cmd:
                out.append(p)
        except psutil.Error:
            pass
    return out
# The raylet and workers end within a second of SIGTERM; Ray's GCS server lingers ~30 s: killed after 5 s.
for sig, wait_s in ((signal.SIGTERM, 5), (signal.SIGKILL, 20)):
    for p in mine():
        try:
            p.send_signal(sig)
        except psutil.Error:
            pass
    psutil.wait_procs(mine(), timeout=wait_s)
print("stopped the processes of", mark)
"""


def _missing() -> str:
    if os.name != "posix" or os.geteuid() != 0:
        return "needs root (it runs sshd and logs in over SSH)"
    for tool, pkg in ((SSHD, "openssh-server"), ("rsync", "rsync"), ("nc", "netcat-openbsd")):
        if shutil.which(tool) is None:
            return f"{tool} not found: apt-get install {pkg} (scripts/test does as root)"
    if shutil.which("ray", path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"):
        return "a system-wide `ray` is on root's PATH: the test will not risk `ray stop` reaching it"
    return ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cluster_pids(mark: str) -> list:
    """Processes whose command line names ``mark`` (the test cluster's temp dir)."""
    import psutil

    out = []
    for p in psutil.process_iter(["cmdline", "name"]):
        with contextlib.suppress(psutil.Error):
            # ssh clients of the launcher name the temp dir in their `ray start` command; they are not the cluster
            if (
                p.pid != os.getpid()
                and p.info["name"] not in ("ssh", "sshd")
                and mark in " ".join(p.info["cmdline"] or [])
            ):
                out.append((p.pid, p.info["name"]))
    return out


@contextlib.contextmanager
def ssh_head(tmp: Path):
    """sshd on 127.0.0.1:<free port> letting the test's key in as root with HOME a fresh folder.

    Yields (key, port, home, temp_dir): ``temp_dir`` is the Ray temp dir the head must use.
    """
    home = Path(tempfile.mkdtemp(prefix="rl-launch-home-", dir="/tmp"))
    temp_dir = home / "ray"
    proc = None
    try:
        key = tmp / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        host_key = tmp / "host_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(host_key)], check=True)
        auth_keys = tmp / "authorized_keys"
        auth_keys.write_text(Path(f"{key}.pub").read_text())
        os.chmod(auth_keys, 0o600)
        bin_dir = home / "bin"
        bin_dir.mkdir()
        (home / "stop_cluster.py").write_text(STOP_SCRIPT)
        wrapper = bin_dir / "ray"
        wrapper.write_text(
            "#!/bin/bash\n"
            f'if [ "$1" = "stop" ]; then exec {sys.executable} {home / "stop_cluster.py"} {temp_dir}; fi\n'
            f'exec {Path(sys.executable).parent / "ray"} "$@"\n'
        )
        os.chmod(wrapper, 0o755)
        (home / ".bashrc").write_text(
            f"export PATH={bin_dir}:{Path(sys.executable).parent}:$PATH\nexport PYTHONPATH={ROOT}\n"
            "export RAY_ENABLE_UV_RUN_RUNTIME_ENV=0 OMP_NUM_THREADS=1\n"
        )
        port = _free_port()
        cfg = tmp / "sshd_config"
        cfg.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nPidFile {tmp / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {auth_keys}\nAllowUsers root\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
            f"UsePAM no\nStrictModes no\nMaxStartups 50\nMaxSessions 50\nSetEnv HOME={home}\n"
            "Subsystem sftp internal-sftp\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)
        with open(tmp / "sshd.log", "w") as log:
            proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=log, stderr=subprocess.STDOUT)
        for _ in range(300):
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            if proc.poll() is not None:
                raise RuntimeError(f"sshd exited: {(tmp / 'sshd.log').read_text()}")
            time.sleep(0.1)
        # Before any launcher call: the login shell the launcher uses must find the wrapper first.
        found = subprocess.run(
            [
                "ssh",
                "-i",
                str(key),
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                f"ProxyCommand=nc 127.0.0.1 {port}",
                "root@127.0.0.1",
                "bash --login -c -i 'source ~/.bashrc; command -v ray'",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert found.stdout.strip().splitlines()[-1:] == [str(wrapper)], (found.stdout, found.stderr)
        yield key, port, home, temp_dir
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
        for pid, _ in cluster_pids(str(temp_dir)):  # only after a failure: never leave the test cluster running
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(home, ignore_errors=True)


def cluster_yaml(key: Path, port: int, temp_dir: Path) -> dict:
    gcs = _free_port()
    return {
        "cluster_name": f"rlt-{secrets.token_hex(4)}",
        "provider": {"type": "local", "head_ip": "127.0.0.1", "worker_ips": []},
        "auth": {"ssh_user": "root", "ssh_private_key": str(key), "ssh_proxy_command": f"nc 127.0.0.1 {port}"},
        "min_workers": 0,
        "max_workers": 0,
        "setup_commands": [],
        "head_start_ray_commands": [
            f"ray start --head --node-ip-address=127.0.0.1 --port={gcs} --num-cpus=4 --temp-dir={temp_dir} "
            "--include-dashboard=false --disable-usage-stats"
        ],
        "worker_start_ray_commands": [],
    }


@pytest.mark.skipif(bool(_missing()), reason=_missing() or "ok")
def test_launch_train_reuse_teardown_leaves_nothing(tmp_path):
    with ssh_head(tmp_path) as (key, port, home, temp_dir):
        spec = tmp_path / "cluster.json"
        config = cluster_yaml(key, port, temp_dir)
        spec.write_text(json.dumps({"config": config, "mark": str(temp_dir)}))
        try:
            _launch_and_check(spec, temp_dir)
        finally:  # the local provider's record of this cluster (on the launching machine)
            for suffix in ("state", "lock"):
                Path(f"/tmp/ray/cluster-{config['cluster_name']}.{suffix}").unlink(missing_ok=True)


def _launch_and_check(spec: Path, temp_dir: Path) -> None:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.utils.test_cluster_launch", str(spec)],  # never the temp dir in argv
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1000,
    )
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    report = json.loads(proc.stdout.strip().splitlines()[-2])
    assert proc.stdout.strip().splitlines()[-1] == "teardown done; left: []"
    assert "launching Ray cluster" in proc.stdout  # the launcher's progress shows in the cell
    assert report["iterations"] == 2
    assert len(report["node_ips"]) == 1  # the head alone (max_workers 0)
    assert report["same_lab"] is True
    assert report["raylets_before"] and report["raylets_before"] == report["raylets_after_relaunch"]
    assert report["plain_lab_has_teardown"] is False
    assert report["head_processes"]  # the launched head really ran here (raylet, gcs_server, workers)
    assert cluster_pids(str(temp_dir)) == []  # `ray down` left no process of the cluster


def _drive(spec_path: str) -> None:
    """In a fresh interpreter: launch, train, re-run the cell, launch again from scratch (reused), tear down."""
    from rlightning.notebook import Lab
    from rlightning.notebook import launch as launch_mod
    from tests.support.remote_driver import tiny_config

    spec = json.loads(Path(spec_path).read_text())
    config, mark = spec["config"], spec["mark"]

    def raylets():
        return sorted(pid for pid, name in cluster_pids(mark) if name == "raylet")

    lab = Lab.launch(config)
    same = Lab.launch(config) is lab  # re-running the cell
    info = lab.cluster_info()
    run = lab.build(tiny_config())
    history = run.run(2)
    before = raylets()
    head_processes = sorted({name for _, name in cluster_pids(mark)})
    lab.shutdown()
    launch_mod._LAUNCHED.clear()  # as a new kernel would: the launcher finds the running head and keeps it
    lab2 = Lab.launch(config)
    after = raylets()
    lab2.teardown()
    print(
        json.dumps(
            {
                "iterations": len(history),
                "node_ips": info["node_ips"],
                "same_lab": same,
                "raylets_before": before,
                "raylets_after_relaunch": after,
                "plain_lab_has_teardown": hasattr(Lab, "teardown"),
                "head_processes": head_processes,
            }
        )
    )
    print("teardown done; left:", cluster_pids(mark))


if __name__ == "__main__":
    _drive(sys.argv[1])


def test_launch_rejects_a_bad_cluster_yaml(tmp_path):
    from rlightning.notebook import Lab
    from rlightning.notebook.launch import head_port, load_cluster_config

    with pytest.raises(FileNotFoundError, match="no cluster YAML at"):
        Lab.launch(str(tmp_path / "missing.yaml"))
    with pytest.raises(TypeError, match="must be a path to the YAML `ray up` takes or a dict, got int"):
        Lab.launch(3)
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster_name: x\nprovider: {}\n")
    with pytest.raises(ValueError, match="needs provider.type"):
        Lab.launch(str(bad))
    good = tmp_path / "good.yaml"
    good.write_text(
        "provider: {type: local, head_ip: 10.0.0.5}\nhead_start_ray_commands: ['ray start --head --port=7001']\n"
    )
    assert load_cluster_config(str(good))["provider"]["head_ip"] == "10.0.0.5"
    assert head_port(load_cluster_config(str(good))) == 7001
    assert head_port({"provider": {"type": "aws"}}) == 6379


def test_only_launched_labs_have_teardown():
    from rlightning.notebook import Lab
    from rlightning.notebook.launch import LaunchedLab

    assert not hasattr(Lab, "teardown")
    assert issubclass(LaunchedLab, Lab) and callable(LaunchedLab.teardown)
