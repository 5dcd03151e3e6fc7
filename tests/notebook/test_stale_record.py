"""Lab.local recovers by itself when an earlier cluster died uncleanly and left its address recorded."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

RECORD = Path("/tmp/ray/ray_current_cluster")

CODE = """
import ray
from rlightning.notebook import Lab
lab = Lab.local(num_cpus=2)
print("cpus", lab.cluster_info()["cpus"])
lab.shutdown()
print("initialized-after-shutdown", ray.is_initialized())
"""


@pytest.mark.ray
@pytest.mark.slow
def test_lab_local_ignores_a_dead_cluster_record(tmp_path):
    backup = RECORD.read_text() if RECORD.exists() else None
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    RECORD.write_text("127.0.0.1:9\n")  # the address of a cluster that is gone
    try:
        # it builds nothing: no background torch import (~4 CPU-s) while Ray starts
        env = {**os.environ, "RLIGHTNING_WARM_IMPORTS": "0"}
        out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=240, env=env)
    finally:
        if backup is None:
            RECORD.unlink(missing_ok=True)
        else:
            RECORD.write_text(backup)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "cpus 2.0" in out.stdout
    assert "initialized-after-shutdown False" in out.stdout
