"""Everything a local runtime started by rlightning opens listens on 127.0.0.1."""

from __future__ import annotations

import os

import psutil
import pytest


@pytest.mark.ray
def test_local_runtime_listens_on_loopback_only(ray_runtime):
    from rlightning.utils.ray.runtime import ray_started_here

    assert ray_started_here()

    @ray_runtime.remote(num_cpus=0.1)
    class Probe:
        def pid(self) -> int:
            return os.getpid()

    probe = Probe.remote()
    actor_pid = ray_runtime.get(probe.pid.remote())
    pids = {p.pid for p in psutil.Process().children(recursive=True)} | {os.getpid(), actor_pid}
    listening = [c for c in psutil.net_connections(kind="inet") if c.status == "LISTEN" and c.pid in pids]
    assert {c.pid for c in listening} > {os.getpid()}, "the Ray services and workers were found"
    exposed = [(c.laddr.ip, c.laddr.port, c.pid) for c in listening]
    exposed = [x for x in exposed if x[0] not in ("127.0.0.1", "::1", "::ffff:127.0.0.1")]
    assert actor_pid in {c.pid for c in listening}, "the actor's worker serves on loopback"
    ray_runtime.kill(probe)
    assert not exposed, f"listening beyond loopback: {exposed}"
    assert {n["NodeManagerAddress"] for n in ray_runtime.nodes()} == {"127.0.0.1"}
