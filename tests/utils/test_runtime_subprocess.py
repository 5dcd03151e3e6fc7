"""The lease in a fresh interpreter: start once, re-acquire safely, shut down only what it started."""

import subprocess
import sys

import pytest

CODE = """
import sys
import ray
from rlightning.utils.ray import runtime
from rlightning.utils.ray.runtime import acquire_ray, release_ray, ray_started_here
from rlightning.utils.ray.launcher import launch_ray_actor
assert "torch" not in sys.modules and "rlightning.utils.builders" not in sys.modules
assert acquire_ray(num_cpus=2) is True
assert ray_started_here()
warm = runtime._warm["thread"]
assert warm is not None and warm.name == "rlightning-warm-imports", "ray.init ran without the learner imports"
assert not warm.is_alive(), "acquire_ray returned with the background import still running"
assert "rlightning.utils.builders" in sys.modules and "torch" in sys.modules
assert runtime.warm_imports() is warm   # once per process
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


WARM_OFF = """
import os, sys
os.environ["RLIGHTNING_WARM_IMPORTS"] = "0"
from rlightning.utils.ray.runtime import warm_imports
assert warm_imports(("json.tool",)) is None and "json.tool" not in sys.modules
os.environ["RLIGHTNING_WARM_IMPORTS"] = "1"
import logging
from rlightning.utils.ray.runtime import finish_warm_imports
records = []
handler = logging.Handler()
handler.emit = records.append
logging.getLogger("rlightning").addHandler(handler)
t = warm_imports(("json.tool", "no_such_module_xyz"))
finish_warm_imports(30)
assert "json.tool" in sys.modules, "the module was not imported in the background"
assert not t.is_alive() and warm_imports(("csv",)) is t  # one thread per process
messages = [r.getMessage() for r in records]
failed = "importing no_such_module_xyz in the background failed: ModuleNotFoundError"
assert any(failed in m for m in messages), messages
finish_warm_imports(30)
assert len(records) == len(messages), "the failure is reported once"
print("warm-ok")
"""


def test_warm_imports_run_once_in_the_background_and_can_be_turned_off():
    out = subprocess.run([sys.executable, "-c", WARM_OFF], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "warm-ok" in out.stdout


FORK_DURING_WARM = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
from rlightning.utils.ray.runtime import finish_warm_imports, warm_imports

def wait_for_the_background_import():  # holds this fork between its `before` and `after` hooks
    deadline = time.monotonic() + 10
    while "uses_a_thread_pool" not in sys.modules and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)

os.register_at_fork(before=wait_for_the_background_import)
warm_imports(("uses_a_thread_pool",))
pid = os.fork()  # as ray.init's process start does while the learner side imports
if pid == 0:
    os._exit(0)
os.waitpid(pid, 0)
finish_warm_imports(30)
assert "uses_a_thread_pool" in sys.modules
print("fork-ok")
"""


def test_a_fork_while_warm_imports_run_leaves_no_fork_hook_half_run(tmp_path):
    """torch and tensordict import ``concurrent.futures.thread``, whose fork hooks are a lock's acquire and
    release: imported by the background thread while ``ray.init`` forks, only the release ran and the
    interpreter printed "release unlocked lock" (seen in a fresh install's first notebook kernel)."""
    (tmp_path / "uses_a_thread_pool.py").write_text("import concurrent.futures.thread\n")
    out = subprocess.run(
        [sys.executable, "-c", FORK_DURING_WARM, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0 and "fork-ok" in out.stdout, out.stderr[-2000:]
    assert "Exception ignored" not in out.stderr, out.stderr
