"""A Ray env worker that hangs past ``env.step_timeout_s`` is killed and recreated, and counted (issue 33)."""

from __future__ import annotations

import pytest

from rlightning.env import EnvWorkerError
from rlightning.env.recovery import WorkerRecovery
from rlightning.env.utils.stats import GroupStats
from tests.support.configs import small_ppo
from tests.support.env_flaky import count_lines

FLAKY = "tests.support.env_flaky:Flaky-v0"


def _hanging_run(tmp_path, build, layout, *extra, workers=1):
    cfg = small_ppo(
        tmp_path,
        False,
        f"env.name={FLAKY}",
        f"env.num_workers={workers}",
        "cluster.remote_env=true",
        "env.num_cpus=0.25",
        "train.rollout_steps=8",
        "train.target_return=null",
        layout,
        *extra,
    )
    log = tmp_path / "events.log"
    cfg.env.env_kwargs = {"episode_length": 5, "hang_at": 20, "log_path": str(log)}
    return build(cfg).engine, log


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize(
    "layout, workers",
    [
        ("cluster.inference=env_workers", 1),
        ("cluster.inference=eval_workers", 1),
        ("cluster.inference=eval_workers", 2),
    ],
    ids=["rollout", "lockstep-step", "pipelined-step"],
)
def test_a_hung_env_is_recreated_and_the_run_goes_on(tmp_path, build, ray_runtime, layout, workers):
    engine, log = _hanging_run(tmp_path, build, layout, "env.step_timeout_s=3", workers=workers)
    history = engine.run(iterations=5)  # the 20th step call (third rollout) hangs for good
    assert count_lines(log, "hang") == 1
    assert engine.iteration == 5 and history[-1]["env_timeouts"] == 1 == history[-1]["env_restarts"]
    assert history[1]["env_timeouts"] == 0


@pytest.mark.ray
def test_past_the_limit_a_hang_stops_the_run_naming_the_worker_and_the_time(tmp_path, build, ray_runtime):
    engine, _ = _hanging_run(
        tmp_path, build, "cluster.inference=eval_workers", "env.step_timeout_s=1.5", "env.max_restarts=0"
    )
    with pytest.raises(
        EnvWorkerError,
        match=r"env worker tests\.support\.env_flaky\.Flaky-v0-0 step did not return within 1\.5 s "
        r"\(env\.step_timeout_s\); it was already restarted 0 time\(s\): max_restarts=0 reached",
    ):
        engine.run(iterations=5)
    assert engine.env_group.stats()["total_timeouts"] == 1


def test_the_default_timeout_comes_from_the_measured_times():
    recovery = WorkerRecovery(GroupStats(["e-0"]), lambda slot: None, lambda slot: None)
    assert recovery.timeout_for("step") is None  # local workers cannot be interrupted
    recovery.remote = True
    assert recovery.timeout_for("step") is None  # nothing measured yet
    for seconds in (0.01, 0.02, 0.9):
        recovery.record("collect", seconds)
    assert recovery.timeout_for("collect") == 60.0  # max(60 s, 100 x the median 0.02 s)
    for seconds in (2.0, 2.0, 2.0):
        recovery.record("collect", seconds)
    assert recovery.timeout_for("collect") == pytest.approx(100 * 1.45)
    recovery.step_timeout_s = 5.0  # an explicit env.step_timeout_s wins
    assert recovery.timeout_for("collect") == 5.0


@pytest.mark.ray
def test_one_bounded_get_resolves_a_raised_a_hung_and_a_healthy_call(ray_runtime):
    # The calls of one lock step: worker a's env raised, b hangs, c answers. One ray.get bounded by the
    # timeout (no ray.wait first); a is recovered, b is timed out within the timeout, c's answer is kept.
    import time
    from types import SimpleNamespace

    import ray

    @ray.remote
    def answer(kind):
        if kind == "raise":
            raise ValueError("the env raised")
        if kind == "hang":
            time.sleep(60)
        return "stepped"

    seen = []

    class Recorded(WorkerRecovery):
        def time_out(self, slot, method, timeout):
            seen.append(("timeout", slot.env_id, timeout))
            return "reset " + slot.env_id

        def recover(self, slot, err, method):
            seen.append(("recover", slot.env_id, type(err).__name__))
            return "reset " + slot.env_id

    ray.get([answer.remote("ok") for _ in range(3)])  # the task workers started: the calls below run at once
    recovery = Recorded(GroupStats(["a", "b", "c"]), lambda slot: None, lambda slot: None)
    recovery.remote, recovery.step_timeout_s = True, 3.0
    slots = [SimpleNamespace(env_id=i, failures=1) for i in "abc"]
    start = time.perf_counter()
    replaced = {}
    calls = [answer.remote(k) for k in ("raise", "hang", "ok")]
    try:
        out = recovery.resolve(slots, calls, replaced)
    finally:
        ray.cancel(calls[1], force=True)
    assert out == ["reset a", "reset b", "stepped"] and set(replaced) == {0, 1}, seen
    assert seen[0][:2] == ("recover", "a") and "ValueError" in seen[0][2] and seen[1] == ("timeout", "b", 3.0)
    assert time.perf_counter() - start < 10  # b was not waited for (it sleeps 60 s)
    assert slots[2].failures == 0  # the healthy call forgives earlier failures

    # every call healthy: one bounded ray.get, the time recorded for the derived timeout
    out = recovery.resolve(slots, [answer.remote("ok") for _ in range(3)])
    assert out == ["stepped"] * 3 and recovery._durations["step"]  # noqa: SLF001
