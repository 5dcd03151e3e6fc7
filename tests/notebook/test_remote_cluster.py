"""A real separate cluster (`ray start --head` on 127.0.0.1): a Lab joins it, trains and leaves nothing behind;
a notebook kernel killed mid-run leaves nothing behind either."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks.load import job_processes
from tests.support.cluster import token_file

# A driver that builds nothing: Lab.connect imports no torch in the background (~4 CPU-s) while it joins.
NO_WARM_IMPORTS = {**os.environ, "RLIGHTNING_WARM_IMPORTS": "0"}


def _driver(*args: str, secret: str = "", env=None) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.remote_driver", *args],
        capture_output=True,
        text=True,
        timeout=420,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if secret:  # logs at DEBUG, reprs, HTML summaries: none shows the token
        assert secret not in out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.ray
@pytest.mark.slow
def test_lab_on_a_separate_cluster_trains_and_cleans_up(head_cluster):
    address = head_cluster["address"]
    token = Path(token_file()).read_text().strip()
    assert len(token) >= 16
    result = _driver("train", address, token_file(), secret=token)
    assert result["iterations"] == 2
    assert result["cpus"] == 4
    assert result["replaced"] is True
    assert _driver("actors", address, token_file(), env=NO_WARM_IMPORTS)["alive"] == []


@pytest.mark.ray
@pytest.mark.slow
def test_token_cluster_without_token_says_what_to_do(head_cluster):
    code = (
        "import os; os.environ.pop('RAY_AUTH_MODE', None); os.environ.pop('RAY_AUTH_TOKEN', None);"
        "os.environ['RAY_AUTH_TOKEN_PATH'] = '/nonexistent';"
        # Ray retries a refused GCS connection once a second for 20 s before it fails, and the Lab waits for
        # its background import of torch and the learner side; one try, nothing imported, shows the error
        "os.environ['RAY_gcs_server_port_wait_time_s'] = '1'; os.environ['RLIGHTNING_WARM_IMPORTS'] = '0';"
        "from rlightning.notebook import Lab\n"
        "try:\n    Lab.connect(ADDRESS, timeout_s=5)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    address = head_cluster["address"]
    out = subprocess.run(
        [sys.executable, "-c", code.replace("ADDRESS", repr(address))], capture_output=True, text=True, timeout=300
    )
    assert "ClusterConnectionError" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "token" in out.stdout


KERNEL_CELL = """
import json, os
from rlightning.notebook import Lab
from tests.support.remote_driver import tiny_config
cfg = tiny_config()
cfg.cluster.remote_storage = True
cfg.cluster.buffer_each_cpu_num = 0.5
lab = Lab.connect({address!r}, token_file={token!r})
run = lab.build(cfg)
run.step()
import ray
print("KERNEL-READY", json.dumps({{"pid": os.getpid(), "job": ray.get_runtime_context().get_job_id()}}))
"""


def _cluster_state(address: str) -> dict:
    code = (
        "import json, ray\n"
        "from rlightning.notebook import Lab\n"
        "from tests.support.cluster import alive_actor_classes\n"
        f"lab = Lab.connect({address!r}, token_file={token_file()!r})\n"
        "pgs = [p for p in ray.util.placement_group_table().values() if p.get('state') != 'REMOVED']\n"
        "print(json.dumps({'alive': alive_actor_classes(), 'placement_groups': len(pgs)}))\n"
        "lab.shutdown()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=NO_WARM_IMPORTS)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.ray
@pytest.mark.slow
def test_dead_kernel_leaves_no_actors_groups_or_workers(head_cluster):
    from jupyter_client.manager import start_new_kernel

    head, address = head_cluster, head_cluster["address"]
    km, kc = start_new_kernel(kernel_name="python3", cwd=os.getcwd(), env=dict(os.environ))
    try:
        outputs = []
        reply = kc.execute_interactive(
            KERNEL_CELL.format(address=address, token=token_file()),
            timeout=400,
            output_hook=lambda msg: outputs.append(msg["content"].get("text", "")),
        )
        text = "".join(outputs)
        assert reply["content"]["status"] == "ok", text[-3000:]
        ready = json.loads(text.split("KERNEL-READY", 1)[1].strip().splitlines()[0])
        during = job_processes(ready["job"], head["session"])
        kinds = {title.split(".")[0] for title in during.values()}  # "ray::Class" or "ray::Class.method"
        # the preset's env workers act with their own policy copies: no eval worker is built
        expected = {"ray::RolloutWorker", "ray::PPOPolicy_train", "ray::Storage"}
        assert expected <= kinds and len(during) >= 4, during
        pid = ready["pid"]
        os.kill(pid, signal.SIGKILL)  # the kernel dies: no atexit, no shutdown
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
    deadline = time.time() + 120
    left = during
    while left and time.time() < deadline:
        time.sleep(1)
        left = job_processes(ready["job"], head["session"])
    assert not left, f"worker processes of the dead kernel's job still running: {left}"
    state = _cluster_state(address)
    assert state == {"alive": [], "placement_groups": 0}
