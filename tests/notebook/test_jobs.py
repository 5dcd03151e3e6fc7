"""`lab.submit`: a training as a Ray Job, followed (status, logs, metrics) and stopped from the notebook.

The real test starts a head with the dashboard (`ray start --head --include-dashboard=true`, its own
``--temp-dir``) in a subprocess, submits a 2-iteration cartpole_ppo and follows it to SUCCEEDED, and stops
a second one mid-run; it stops exactly that head's processes (never `ray stop`). The Jobs API needs Ray's
dashboard packages (the ``dashboard`` extra): from this environment, or from the folder named by
``RLIGHTNING_DASHBOARD_SITE`` (a ``pip install --target`` of them), which goes on the head's and the
driver's ``PYTHONPATH`` only, so no other test's Ray start changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from rlightning.notebook.jobs import METRICS_PREFIX, TrainingJob, TrainingJobError
from tests.support.cluster import free_port, stop_process_group, token_file

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


class FakeClient:
    """The four calls `TrainingJob` makes of a `JobSubmissionClient`."""

    def __init__(self, statuses, logs, message=""):
        self.statuses, self.log_text, self.message, self.stopped = list(statuses), logs, message, False

    def get_job_status(self, job_id):
        return self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]

    def get_job_logs(self, job_id):
        return self.log_text

    def get_job_info(self, job_id):
        return type("Info", (), {"message": self.message})()

    def stop_job(self, job_id):
        self.stopped = True
        self.statuses = ["STOPPED"]


def _log(*rows, extra="training cartpole_ppo\n"):
    return extra + "".join(f"{METRICS_PREFIX} {json.dumps(r)}\n" for r in rows) + f"{METRICS_PREFIX} {{cut"


def test_training_job_reads_metrics_follows_logs_and_stops(capsys):
    rows = [{"iteration": 1, "env_steps": 512, "episode_return_mean": 20.5}, {"iteration": 2, "env_steps": 1024}]
    job = TrainingJob(FakeClient(["PENDING", "RUNNING", "SUCCEEDED"], _log(*rows)), "rlightning-x-1")
    assert job.metrics() == rows  # a line cut mid-write is left out
    assert list(job.metrics_df()["iteration"]) == [1, 2]
    assert job.logs() == "training cartpole_ppo" and job.logs(tail=0) == ""
    assert job.wait(poll_s=0) == "SUCCEEDED"
    assert capsys.readouterr().out == "training cartpole_ppo\n"  # followed once, without the metrics lines
    assert repr(job) == "TrainingJob(rlightning-x-1: SUCCEEDED, 2 iteration(s))"

    client = FakeClient(["RUNNING"], _log(rows[0]))
    assert TrainingJob(client, "j").stop(timeout=5) == "STOPPED" and client.stopped
    failed = TrainingJob(FakeClient(["FAILED"], "Traceback ...\nValueError: bad\n", "exit code 1"), "j")
    with pytest.raises(TrainingJobError, match="job j failed: exit code 1\nlast log lines:\nTraceback"):
        failed.wait(follow=False)
    with pytest.raises(TimeoutError, match="still RUNNING after 0 s; it keeps running"):
        TrainingJob(FakeClient(["RUNNING"], ""), "j").wait(timeout=0, follow=False, poll_s=0)


@pytest.mark.ray
def test_submit_without_a_dashboard_fails_at_once_naming_the_extra(ray_runtime):
    from rlightning.notebook import Lab
    from rlightning.notebook.errors import JobsUnavailableError
    from tests.support.configs import small_ppo

    lab = Lab.local()
    t0 = time.monotonic()
    with pytest.raises(JobsUnavailableError, match=r"rlightning\[dashboard\].*--include-dashboard=true"):
        lab.submit(small_ppo(Path("unused"), True))
    assert time.monotonic() - t0 < 30  # no wait for a dashboard that is not there
    with pytest.raises(TypeError, match="Lab.submit expects a MainConfig"):
        lab.submit({"engine": "syncrl"})


def _dashboard_pythonpath() -> str:
    """PYTHONPATH entries that make Ray's dashboard importable ('' when this environment has it)."""
    site = os.environ.get("RLIGHTNING_DASHBOARD_SITE", "")
    code = "import ray.dashboard.optional_deps, ray.dashboard.modules.job.sdk as s; assert s.requests"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (site, str(ROOT)) if p)}
    probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    if probe.returncode != 0:
        pytest.skip(
            "Ray's dashboard packages are not installed (pip install 'rlightning[dashboard]', or "
            f"RLIGHTNING_DASHBOARD_SITE=<pip install --target folder>): {probe.stderr.strip().splitlines()[-1]}"
        )
    return site


def _our_processes(marker: str) -> list:
    """Pids of the processes whose command line names ``marker`` (the head's own temp dir) or that run in it."""
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            with contextlib.suppress(OSError):
                cmdline = (proc / "cmdline").read_bytes().decode(errors="replace")
                if marker in cmdline or os.readlink(proc / "cwd").startswith(marker):
                    pids.append(int(proc.name))
    return pids


@contextlib.contextmanager
def _dashboard_head(tmp: Path, site: str):
    temp_dir = Path(tempfile.mkdtemp(prefix="rl-job-"))  # short: Ray's socket paths must fit in 107 bytes
    port, dash, client = free_port(), free_port(), free_port()
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"  # the job's `python` is this environment's
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, str(ROOT)) if p)
    env.setdefault("RAY_agent_register_timeout_ms", "120000")
    env["RLIGHTNING_WARM_IMPORTS"] = "0"
    log = tmp / "head.log"
    cmd = [
        str(BIN / "ray"), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", "--num-cpus=8",
        "--include-dashboard=true", "--dashboard-host=127.0.0.1", f"--dashboard-port={dash}",
        f"--ray-client-server-port={client}", f"--temp-dir={temp_dir}", "--disable-usage-stats", "--block",
    ]  # fmt: skip
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.time() + 240
        while "block forever" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.time() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}", env, temp_dir
    finally:
        stop_process_group(proc)
        for pid in _our_processes(str(temp_dir)):  # what left the group (job drivers run in their own session)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.mark.ray
@pytest.mark.slow
def test_submit_follows_a_job_to_success_and_stops_another_mid_run(tmp_path):
    site = _dashboard_pythonpath()
    with _dashboard_head(tmp_path, site) as (address, env, temp_dir):
        out = subprocess.run(
            [sys.executable, "-m", "tests.support.job_driver", address, token_file(), str(tmp_path / "runs")],
            capture_output=True, text=True, timeout=560, env=env, cwd=str(ROOT),
        )  # fmt: skip
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        got = json.loads(out.stdout.strip().splitlines()[-1])
        for _ in range(60):  # the jobs have ended: their drivers exit (they run in their own sessions)
            # a job's driver runs in its working_dir, under the head's temp dir
            drivers = [pid for pid in _our_processes(str(temp_dir)) if pid in _our_processes("rlightning.cli")]
            if not drivers:
                break
            time.sleep(1)
        assert not drivers, "a job's driver is still running"
    assert got["final"] == "SUCCEEDED" and got["again_status"] == "SUCCEEDED", got
    assert got["seen"][-1] == "SUCCEEDED" and set(got["seen"][:-1]) <= {"PENDING", "RUNNING"}, got["seen"]
    assert [m["iteration"] for m in got["metrics"]] == [1, 2] == got["df_iterations"]
    assert got["metrics"][1]["env_steps"] > got["metrics"][0]["env_steps"] > 0
    assert "training config.yaml (syncrl, ppo on CartPole-v1)" in got["logs"]  # the CLI's train ran it
    assert "iterations      2" in got["logs"] and METRICS_PREFIX not in got["logs"]
    assert "SUCCEEDED, 2 iteration(s)" in got["repr"]
    assert got["stopped_status_before"] == "RUNNING" and got["stopped_metrics_before"] >= 1
    assert got["stopped_final"] == "STOPPED"
    assert got["stopped_metrics_after"] < 10_000
