import pytest

from rlightning.utils.ray import runtime
from rlightning.utils.ray.handle import LocalFuture, WorkerHandle, resolve, resolve_one, wait_any
from rlightning.utils.ray.launcher import launch_ray_actor
from rlightning.utils.ray.remote_class import DistributedMixin, find_free_port
from tests.support.ray_actors import Counter, DistCounter


def test_local_handle_calls_and_errors():
    h = WorkerHandle(Counter(start=1))
    assert not h.is_remote
    assert h.call("incr") == 2
    fut = h.submit("incr")
    assert isinstance(fut, LocalFuture) and resolve([fut, 7]) == [3, 7]
    bad = h.submit("fail")
    with pytest.raises(ValueError, match="counter refused"):
        resolve_one(bad)
    ready, pending = wait_any([h.submit("incr")])
    assert len(ready) == 1 and pending == []
    h.kill()  # no-op for local workers


@pytest.mark.ray
def test_remote_handle_same_interface(ray_runtime):
    actor = launch_ray_actor(Counter, 10, step=5, options={"num_cpus": 0.25})
    h = WorkerHandle(actor)
    assert h.is_remote
    assert h.call("incr") == 15
    futs = [h.submit("incr"), h.submit("incr")]
    assert resolve(futs + [1]) == [20, 25, 1]
    ready, pending = wait_any([h.submit("incr")], timeout=30)
    assert len(ready) + len(pending) == 1
    assert h.call("env", "OMP_NUM_THREADS") == "1"
    with pytest.raises(Exception, match="counter refused"):
        h.call("fail")
    h.kill()


@pytest.mark.ray
def test_distributed_mixin_in_actor(ray_runtime):
    h = WorkerHandle(launch_ray_actor(DistCounter, options={"num_cpus": 0.25}))
    info = h.call("get_placement_info")
    assert info["node_ip"] and info["gpu_ids"] == [] and info["node_id"]
    assert 0 < h.call("get_free_port") < 65536
    assert h.call("incr") == 1
    h.kill()


def test_distributed_mixin_has_no_constructor():
    cls = type("P_train", (Counter, DistributedMixin), {})
    obj = cls(start=3)
    assert obj.rank == 0 and obj.world_size == 1 and obj.value == 3
    assert 0 < find_free_port() < 65536
    with pytest.raises(ValueError, match=r"rank 2 is outside \[0, 2\)"):
        obj.init_process_group(2, 2, "127.0.0.1", find_free_port())


@pytest.mark.ray
def test_lease_joins_running_runtime(ray_runtime):
    users = runtime.lease_users()
    assert runtime.acquire_ray(num_cpus=2) is False  # already initialised: joined, not restarted
    assert runtime.lease_users() == users + 1
    assert runtime.release_ray() is False  # another lease is still held
    assert ray_runtime.is_initialized()


def test_dashboard_without_its_packages_names_the_extra(monkeypatch):
    import ray._private.utils as ray_utils

    monkeypatch.setattr(ray_utils, "get_dashboard_dependency_error", lambda: ImportError("No module named 'aiohttp'"))
    assert runtime.dashboard_missing() == "No module named 'aiohttp'"
    with pytest.raises(ImportError, match=r"include_dashboard=True .*aiohttp.*rlightning\[dashboard\]"):
        runtime._check_dashboard({"include_dashboard": True})
    runtime._check_dashboard({"include_dashboard": False})  # off: nothing to check


def test_ray_client_without_grpc_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "grpc", None)  # an import of grpc now fails
    with pytest.raises(ImportError, match=r"'ray://10\.0\.0\.1:10001' uses Ray Client.*rlightning\[client\]"):
        runtime._check_client("ray://10.0.0.1:10001")
    runtime._check_client("10.0.0.1:6379")  # a GCS address needs no Ray Client


@pytest.mark.ray
def test_actor_threads_follow_its_cpus_and_driver_env_is_unchanged(ray_runtime):
    import os

    assert runtime.worker_env() == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"} or not runtime.ray_started_here()
    two = WorkerHandle(launch_ray_actor(Counter, 0, options={"num_cpus": 2}))
    one = WorkerHandle(launch_ray_actor(Counter, 0, options={"num_cpus": 0.5}))
    assert two.call("env", "OMP_NUM_THREADS") == "2" and two.call("env", "MKL_NUM_THREADS") == "2"
    assert one.call("env", "OMP_NUM_THREADS") == "1"  # inherited from the runtime: no runtime_env needed
    two.kill()
    one.kill()
    before = {k: os.environ.get(k) for k in runtime.WORKER_THREAD_VARS}
    saved = runtime.worker_env()
    with runtime._worker_thread_env():
        assert all(os.environ[k] for k in runtime.WORKER_THREAD_VARS)
    runtime._state["worker_env"] = saved
    assert {k: os.environ.get(k) for k in runtime.WORKER_THREAD_VARS} == before


@pytest.mark.ray
def test_placement_flags_reach_the_actor_without_a_runtime_env(ray_runtime, monkeypatch):
    """The ``RLIGHTNING_*`` flags (read on access) are set by the actor's constructor, not through
    ``runtime_env``: an actor with a runtime_env of its own cannot take a worker Ray prestarted."""
    import ray.actor

    seen = []
    original = ray.actor.ActorClass.options

    def spy(self, **opts):
        seen.append(opts)
        return original(self, **opts)

    monkeypatch.setattr(ray.actor.ActorClass, "options", spy)
    flags = {"RLIGHTNING_REMOTE_ENV": "1", "RLIGHTNING_REMOTE_TRAIN": "0"}
    h = WorkerHandle(
        launch_ray_actor(
            Counter, 5, options={"num_cpus": 0.5, "runtime_env": {"env_vars": {**flags, "MY_SETTING": "x"}}}, step=2
        )
    )
    try:
        assert h.call("incr") == 7  # the constructor's own arguments still arrive
        assert h.call("env", "RLIGHTNING_REMOTE_ENV") == "1" and h.call("env", "RLIGHTNING_REMOTE_TRAIN") == "0"
        assert h.call("env", "MY_SETTING") == "x"  # any other variable still goes through runtime_env
        assert seen[-1]["runtime_env"] == {"env_vars": {"MY_SETTING": "x"}}
    finally:
        h.kill()
    if runtime.ray_started_here():  # the runtime's workers inherit the thread settings: nothing left to send
        only_flags = WorkerHandle(launch_ray_actor(Counter, 0, options={"runtime_env": {"env_vars": flags}}))
        try:
            assert only_flags.call("env", "RLIGHTNING_REMOTE_ENV") == "1"
            assert "runtime_env" not in seen[-1]
        finally:
            only_flags.kill()
