"""``kill -9`` of a training process at random moments, then ``rlightning train --resume`` (issue 33)."""

import random
import subprocess
import sys
import time

import pytest
import torch

from rlightning.engine.checkpoint import FORMAT_VERSION, load_engine_files
from rlightning.engine.checkpoint_store import list_checkpoints
from tests.support.configs import LOCAL

SMALL = [
    "env.num_workers=2",
    "env.num_envs=4",
    "train.rollout_steps=16",
    "train.iterations=40",
    "train.checkpoint_interval=1",
    "train.keep_checkpoints=3",
    "log.name=killed",
    "seed=1",
    *LOCAL,
]


def _train_until_killed(args, lines_before_kill, delay):
    """Start ``rlightning train``; after ``lines_before_kill`` metrics lines and ``delay`` s, SIGKILL it."""
    cmd = [sys.executable, "-m", "rlightning.cli", "train", *args, "--metrics-lines", "--quiet"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    iterations = []
    try:
        for line in proc.stdout:
            if line.startswith("rlightning-metrics "):
                iterations.append(int(line.split('"iteration": ')[1].split(",")[0]))
                if len(iterations) >= lines_before_kill:
                    break
        time.sleep(delay)
        proc.kill()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert iterations, proc.stderr.read()[-3000:]
    return iterations, proc.returncode


@pytest.mark.slow
def test_kill_9_at_random_moments_leaves_loadable_checkpoints_and_resume_continues(tmp_path):
    rng = random.Random()
    run_dir = tmp_path / "killed"
    newest = 0
    for attempt in range(2):
        lines, delay = rng.randint(1, 3), rng.uniform(0.0, 0.4)
        args = ["cartpole_ppo", *SMALL] if attempt == 0 else ["--resume", str(run_dir)]
        iterations, code = _train_until_killed([*args, "--run-dir", str(tmp_path)], lines, delay)
        where = f"attempt {attempt}: killed {delay:.2f} s after iteration {iterations[-1]} (rc {code})"
        assert code == -9, where
        assert iterations[0] == newest + 1, where  # a resumed run continues after its newest checkpoint
        infos = list_checkpoints(run_dir, FORMAT_VERSION)
        assert infos and all(c.complete for c in infos), (where, [(c.path.name, c.reason) for c in infos])
        for info in infos:  # every folder on disk loads
            state, _ = load_engine_files(info.path)
            torch.load(info.path / "policy.pt", weights_only=True)
            assert state["iteration"] == info.iteration
        assert infos[-1].iteration >= iterations[-1] - 1, where
        assert len(infos) <= 4, where  # keep_checkpoints=3 (a kill between a save and its prune leaves one more)
        newest = infos[-1].iteration
