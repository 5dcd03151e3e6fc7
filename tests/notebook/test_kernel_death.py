"""A notebook kernel that dies leaves nothing behind on a separate `ray start --head` cluster."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from benchmarks.load import job_processes
from tests.support.cluster import ray_head, token_file

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
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.ray
@pytest.mark.slow
def test_dead_kernel_leaves_no_actors_groups_or_workers(tmp_path):
    from jupyter_client.manager import start_new_kernel

    head: dict = {}
    with ray_head(num_cpus=4, info=head) as address:
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
            expected = {"ray::GymnasiumEnv", "ray::PPOPolicy_eval", "ray::PPOPolicy_train", "ray::Storage"}
            assert expected <= kinds and len(during) >= 5, during
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
