"""``lab.submit(cfg, max_retries=N)``: a job whose driver was killed starts again from its checkpoint (issue 33).

The Ray Jobs side is Ray's; what rlightning adds is the job's command (a shell loop around the CLI's
``train``) and its reading of the metrics lines. Both run here without a cluster: the command as the job
would run it, its driver killed with SIGKILL once.
"""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rlightning.notebook.jobs import METRICS_PREFIX, TrainingJob, job_entrypoint, submit_training
from rlightning.utils.config import to_yaml
from tests.support.configs import small_ppo

ROOT = Path(__file__).resolve().parents[2]


class _Recorder:
    def __init__(self):
        self.submitted = {}

    def submit_job(self, **kwargs):
        self.submitted = kwargs

    def get_job_logs(self, job_id):
        return self.logs


def test_submit_with_max_retries_resumes_from_the_jobs_own_run_folder(tmp_path):
    client = _Recorder()
    job = submit_training(client, small_ppo(tmp_path, False, "train.checkpoint_interval=1"), max_retries=2)
    command = client.submitted["entrypoint"]
    saved = yaml.safe_load((Path(client.submitted["runtime_env"]["working_dir"]) / "config.yaml").read_text())
    assert saved["log"]["name"] == job.job_id
    assert command.startswith("sh -c ") and f"--resume {tmp_path}/{job.job_id}" in command and "-lt 2 ]" in command
    assert job_entrypoint("python", "runs/x") == "python -m rlightning.cli train config.yaml --quiet --metrics-lines"
    with pytest.raises(ValueError, match="lab.submit max_retries must be an int >= 0, got -1"):
        submit_training(client, small_ppo(tmp_path), max_retries=-1)
    rows = [{"iteration": 1}, {"iteration": 2, "a": 0}, {"iteration": 3}, {"iteration": 2, "a": 1}, {"iteration": 3}]
    client.logs = "".join(f"{METRICS_PREFIX} {json.dumps(r)}\n" for r in rows)
    assert job.metrics() == [{"iteration": 1}, {"iteration": 2, "a": 1}, {"iteration": 3}]  # rerun rows count once


def _children(pid):
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the driver process through /proc")
def test_a_killed_driver_is_started_again_from_its_checkpoint(tmp_path):
    cfg = small_ppo(Path("runs"), False, "train.checkpoint_interval=1", "train.iterations=4", "log.name=job")
    (tmp_path / "config.yaml").write_text(to_yaml(cfg))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    shell = subprocess.Popen(
        job_entrypoint(sys.executable, "runs/job", max_retries=1),
        shell=True,
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    try:
        for line in shell.stdout:
            lines.append(line)
            if line.startswith(METRICS_PREFIX) and '"iteration": 2,' in line:
                break
        procs = [c for s in _children(shell.pid) for c in [s, *_children(s)]]
        drivers = [c for c in procs if "-m rlightning.cli" in _cmd(c) and not _cmd(c).startswith("sh ")]
        assert drivers, "".join(lines)[-2000:]
        os.kill(drivers[0], signal.SIGKILL)
        lines.extend(shell.stdout)
        assert shell.wait(timeout=300) == 0, "".join(lines)[-3000:]
    finally:
        if shell.poll() is None:
            shell.kill()
    log = "".join(lines)
    assert "the driver exited with 137; retry 1 of 1 from the newest checkpoint" in log
    assert "resuming from runs/job/checkpoints/iter_00000" in log
    job = TrainingJob(type("Logs", (), {"get_job_logs": lambda self, job_id: log})(), "j")
    assert [r["iteration"] for r in job.metrics()] == [1, 2, 3, 4]


def _cmd(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""
