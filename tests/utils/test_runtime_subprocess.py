"""The lease in a fresh interpreter: start once, re-acquire safely, shut down only what it started."""

import subprocess
import sys

import pytest

CODE = """
import ray
from rlightning.utils.ray.runtime import acquire_ray, release_ray, ray_started_here
from rlightning.utils.ray.launcher import launch_ray_actor
assert acquire_ray(num_cpus=2) is True
assert ray_started_here()
assert acquire_ray(num_cpus=2) is False   # a re-run cell: no second ray.init
assert release_ray() is False and ray.is_initialized()
assert release_ray() is True and not ray.is_initialized()
assert release_ray() is False
try:
    launch_ray_actor(dict)
except RuntimeError as e:
    assert "Ray is not initialised" in str(e)
else:
    raise SystemExit("launch without Ray did not fail")
print("lease-ok")
"""


@pytest.mark.ray
@pytest.mark.slow
def test_lease_in_fresh_process():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "lease-ok" in out.stdout
