"""Tests of rlightning/env/env_group.py with env workers as Ray actors."""

import time
from contextlib import contextmanager

import numpy as np
import pytest

import tests.support.env_fixed  # noqa: F401 - registers FixedLength-v0
from rlightning.env import EnvGroup
from rlightning.types import BatchedData, EnvRet, MultiAgentPolicyResponse, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.utils import InternalFlag
from tests.support.env_notebook import load_notebook_cell

pytestmark = pytest.mark.ray


@contextmanager
def _remote_envs():
    before = InternalFlag.snapshot()
    InternalFlag.set(REMOTE_ENV=True)
    try:
        yield
    finally:
        InternalFlag.set(**before)


def _fixed_cfgs(max_restarts=3):
    cfg = dict(name="FixedLength-v0", num_envs=2, env_kwargs={"episode_length": 2}, num_cpus=0.25)
    return [EnvConfig(**cfg, max_restarts=max_restarts), EnvConfig(**cfg, max_restarts=max_restarts)]


def _remote_group(cfgs):
    group = EnvGroup(cfgs)
    with _remote_envs():
        group.init()
    return group


def _resps(env_rets, k=0):
    return BatchedData(
        list(env_rets.ids()),
        [PolicyResponse(i, action=(np.arange(2) + k) % 3) for i in env_rets.ids()],
    )


@pytest.fixture(scope="module")
def remote_group(ray_runtime):
    group = _remote_group(_fixed_cfgs())
    yield group
    group.close()


def _rollout(group, steps=5, seed=3):
    rets = group.reset(seed=seed)
    out = [rets]
    for k in range(steps):
        rets = group.step(_resps(rets, k))
        out.append(rets)
    return out


def test_remote_workers_reproduce_the_local_run(remote_group, ray_runtime):
    assert remote_group.is_remote
    assert all(type(w).__name__ == "ActorHandle" for w in remote_group.workers.values())
    assert [m.num_envs for m in remote_group.env_metas] == [2, 2]
    local = EnvGroup(_fixed_cfgs())
    local.init()
    for remote_rets, local_rets in zip(_rollout(remote_group), _rollout(local)):
        assert remote_rets.ids() == local_rets.ids()
        for a, b in zip(remote_rets.values(), local_rets.values()):
            np.testing.assert_array_equal(a.observation, b.observation)
            np.testing.assert_array_equal(a.last_reward, b.last_reward)
            np.testing.assert_array_equal(a.last_terminated, b.last_terminated)
    local.close()


def test_return_refs_leaves_env_rets_in_the_object_store(remote_group, ray_runtime):
    rets = remote_group.reset(seed=0)
    before = remote_group.stats()["episodes"]
    refs = remote_group.step(_resps(rets), return_refs=True)
    assert refs.is_future and all(isinstance(r, ray_runtime.ObjectRef) for r in refs.values())
    rets = BatchedData(list(refs.ids()), ray_runtime.get(list(refs.values())))
    assert all(isinstance(r, EnvRet) for r in rets.values())
    refs = remote_group.step(_resps(rets), return_refs=True)  # the 2-step episodes end here
    assert remote_group.stats()["episodes"] == before + 4
    assert [r.last_terminated.tolist() for r in ray_runtime.get(list(refs.values()))] == [[True, True]] * 2


def test_policy_responses_may_be_object_refs(remote_group, ray_runtime):
    rets = remote_group.reset(seed=0)
    resps = _resps(rets)
    refs = BatchedData(list(resps.ids()), [ray_runtime.put(r) for r in resps.values()])
    out = remote_group.step(refs)
    assert [r.last_reward.tolist() for r in out.values()] == [[1.0, 2.0], [1.0, 2.0]]


def test_step_async_collects_whatever_is_ready(remote_group):
    rets = remote_group.reset(seed=0)
    remote_group.step_async(_resps(rets))
    collected = {}
    while len(collected) < 2:
        ready = remote_group.collect_async(min_ready=1)
        assert len(ready) >= 1
        collected.update(dict(ready.items()))
    assert sorted(collected) == remote_group.env_ids
    assert all(r.info["episode_length"].tolist() == [1, 1] for r in collected.values())
    assert len(remote_group.collect_async(timeout=0)) == 0


def test_collect_async_gathers_the_other_ready_steps_only_when_asked(remote_group, ray_runtime):
    for gather, sizes in ((True, [2]), (False, [1, 1])):
        rets = remote_group.reset(seed=0)
        remote_group.step_async(_resps(rets))
        ray_runtime.wait(list(remote_group._inflight), num_returns=2)  # both steps done before collecting
        got = [len(remote_group.collect_async(min_ready=1, gather_ready=gather)) for _ in sizes]
        assert got == sizes
        assert len(remote_group.collect_async(timeout=0)) == 0


def test_killed_env_actors_are_restarted(remote_group, ray_runtime):
    group = remote_group
    restarts_before = group.stats()["restarts"]
    group.pop_restarted_env_ids()
    rets = group.reset(seed=0)
    rets = group.step(_resps(rets))
    _kill(ray_runtime, group.workers["FixedLength-v0-1"])
    rets = group.step(_resps(rets, 1))
    # The live worker stepped; the dead one was relaunched and its reset EnvRet stands in for the lost step.
    assert rets[0][1].info["episode_length"].tolist() == [2, 2]
    restarted = rets[1][1]
    assert restarted.info["episode_length"].tolist() == [0, 0] and restarted.last_reward.tolist() == [0.0, 0.0]
    assert group.pop_restarted_env_ids() == ["FixedLength-v0-1"]
    assert group.pop_restarted_env_ids() == []
    st = group.stats()
    assert st["restarts"]["FixedLength-v0-1"] == restarts_before["FixedLength-v0-1"] + 1
    assert st["restarts"]["FixedLength-v0-0"] == restarts_before["FixedLength-v0-0"]
    rets = group.step(_resps(rets, 2))  # the group carries on
    assert rets[1][1].info["episode_length"].tolist() == [1, 1]

    # A death seen through return_refs is handled the same way.
    _kill(ray_runtime, group.workers["FixedLength-v0-0"])
    refs = group.step(_resps(rets, 3), return_refs=True)
    assert isinstance(refs[0][1], EnvRet) and refs[0][1].info["episode_length"].tolist() == [0, 0]
    assert isinstance(refs[1][1], ray_runtime.ObjectRef)
    assert group.pop_restarted_env_ids() == ["FixedLength-v0-0"]
    assert group.stats()["total_restarts"] == sum(restarts_before.values()) + 2
    rets = BatchedData(list(refs.ids()), [refs[0][1], ray_runtime.get(refs[1][1])])
    assert len(group.step(_resps(rets, 4))) == 2


def test_notebook_defined_envs_and_multi_agent_run_in_actors(ray_runtime):
    cell = load_notebook_cell()
    assert cell.CoinEnv.__module__ == "notebook_cell"  # not importable by any worker
    group = _remote_group(
        [
            EnvConfig(name="notebook_coin", num_envs=3, num_cpus=0.25, max_restarts=0),
            EnvConfig(name="NotebookWalk-v0", num_envs=2, env_kwargs={"start": 1}, num_cpus=0.25),
            EnvConfig(name="rendezvous", num_envs=2, num_cpus=0.25),
        ]
    )
    try:
        assert group.env_ids == ["notebook_coin-0", "NotebookWalk-v0-1", "rendezvous-2"]
        rets = group.reset(seed=0)
        coin = rets[0][1].observation[:, 0].astype(np.int64)
        walk = rets[1][1].observation
        assert walk.tolist() == [[1.0], [1.0]]
        agents = ("agent_0", "agent_1")
        resps = BatchedData(
            group.env_ids,
            [
                PolicyResponse("notebook_coin-0", action=coin),
                PolicyResponse("NotebookWalk-v0-1", action=np.array([1, 0])),
                MultiAgentPolicyResponse("rendezvous-2", action={a: np.array([1, 1]) for a in agents}),
            ],
        )
        out = group.step(resps)
        assert out[0][1].last_reward.tolist() == [1.0, 1.0, 1.0]  # guessed every coin
        assert out[1][1].observation.tolist() == [[2.0], [0.0]]
        assert set(out[2][1].observation) == set(agents) and out[2][1].last_reward["agent_0"].shape == (2,)

        # max_restarts=0: a dead worker is not relaunched, the step fails with a clear error.
        _kill(ray_runtime, group.workers["notebook_coin-0"])
        with pytest.raises(
            RuntimeError, match=r"env worker notebook_coin-0 died and was already restarted 0 time\(s\); max_restarts=0"
        ):
            group.step(BatchedData(["notebook_coin-0"], [PolicyResponse("notebook_coin-0", action=coin)]))
        with pytest.raises(RuntimeError, match=r"env worker notebook_coin-0 is gone: it died more than max_restarts=0"):
            group.reset()
        assert list(group.workers) == ["NotebookWalk-v0-1", "rendezvous-2"]
        workers = list(group.workers.values())
    finally:
        group.close()
    # close() stopped the actors it started (ray.kill lands asynchronously: poll until the actor is gone).
    assert _wait_until_dead(ray_runtime, workers[0])


def _kill(ray, actor) -> None:
    """Kill an env actor mid-run and wait until Ray reports it dead (ray.kill lands asynchronously)."""
    ray.kill(actor)
    assert _wait_until_dead(ray, actor)


def _wait_until_dead(ray, actor, attempts: int = 300) -> bool:
    for _ in range(attempts):
        try:
            ray.get(actor.ping.remote(), timeout=30)
        except ray.exceptions.RayActorError:
            return True
        time.sleep(0.1)
    return False


def test_env_actors_do_not_import_torch(remote_group, ray_runtime):
    """An env worker process starts without torch (seconds of import per process, times many workers)."""
    actor = next(iter(remote_group.workers.values()))
    assert ray_runtime.get(actor.__ray_call__.remote(lambda self: "torch" in __import__("sys").modules)) is False
