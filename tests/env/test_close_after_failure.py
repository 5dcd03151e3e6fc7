"""A run whose env worker failed for good closes without starting a Ray runtime or warning about actors it
knows are dead (issue 33). Its own process: the test shuts its Ray runtime down."""

import subprocess
import sys

import pytest

SCRIPT = """
import sys
from pathlib import Path
from rlightning.env import EnvWorkerError
from rlightning.utils.builders import build_run
from rlightning.utils.ray.runtime import acquire_ray, release_ray
from tests.support.configs import small_ppo

tmp = Path(sys.argv[1])
FLAKY = ["env.name=tests.support.env_flaky:Flaky-v0", "env.max_restarts=0", "env.num_workers=1"]


def failed_run(*extra):
    cfg = small_ppo(tmp, False, *FLAKY, *extra)
    cfg.env.env_kwargs = {"fail_every": 3, "log_path": str(tmp / "raises.log")}
    engine = build_run(cfg).engine
    try:
        engine.run(iterations=3)
    except EnvWorkerError:
        print("FAILED-FOR-GOOD", flush=True)
    return engine


failed_run().close()  # local placement: nothing may start Ray
import ray

print("LOCAL-RAY", ray.is_initialized(), flush=True)
acquire_ray(num_cpus=2, include_dashboard=False, log_to_driver=False)
engine = failed_run("cluster.remote_env=true", "env.num_cpus=0.25")
release_ray()  # the runtime goes first (as at interpreter exit), then the run closes
print("CLOSING", flush=True)
engine.close()
print("REMOTE-RAY", ray.is_initialized(), flush=True)
"""


@pytest.mark.ray
@pytest.mark.slow
def test_closing_after_a_worker_failed_for_good_starts_no_runtime_and_names_no_dead_actor(tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
    )
    text = out.stdout
    assert out.returncode == 0, text[-3000:]
    assert text.count("FAILED-FOR-GOOD") == 2
    assert "LOCAL-RAY False" in text and "REMOTE-RAY False" in text
    before, after = text.split("CLOSING", 1)
    assert "Started a local Ray instance" not in after, after[-3000:]  # no new runtime started to close
    assert "Can't find actor" not in after and "closing EnvGroup failed" not in after, after[-3000:]
