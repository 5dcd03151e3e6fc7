"""Rollout routing (rlightning/policy/routing.py): sync splits, async least-loaded, Ray futures."""

from __future__ import annotations

import pytest

from rlightning.policy.policy_group import PolicyGroup
from rlightning.policy.routing import RolloutRouter
from rlightning.types import BatchedData, PolicyResponse, is_object_ref
from rlightning.utils.config import PolicyConfig
from rlightning.utils.ray.handle import WorkerHandle, resolve
from tests.support.policy_data import DISCRETE_META, env_batch
from tests.support.policy_workers import EchoPolicy


class Dummy:
    pass


def router(n: int, mode: str) -> RolloutRouter:
    return RolloutRouter([WorkerHandle(Dummy()) for _ in range(n)], mode)


def test_sync_plan_splits_evenly_over_idle_workers():
    assert router(3, "sync").plan(7) == [(0, 0, 3), (1, 3, 5), (2, 5, 7)]
    assert router(3, "sync").plan(2) == [(0, 0, 1), (1, 1, 2)]
    assert router(2, "sync").plan(0) == []


def test_async_plan_sends_each_batch_to_one_worker_round_robin_among_equals():
    r = router(3, "async")
    assert [r.plan(4) for _ in range(4)] == [[(0, 0, 4)], [(1, 0, 4)], [(2, 0, 4)], [(0, 0, 4)]]


def test_router_rejects_bad_arguments():
    with pytest.raises(ValueError, match="needs at least one worker"):
        RolloutRouter([], "sync")
    with pytest.raises(ValueError, match="rollout_mode='batch' is not a rollout mode; use one of"):
        router(1, "batch")


@pytest.mark.ray
def test_async_routing_sends_work_to_the_least_loaded_worker(async_echo_group):
    group = async_echo_group
    group.construct_network(DISCRETE_META)
    e0, e1 = group.eval_workers
    resolve([e0.submit("close_gate"), e1.submit("close_gate")])
    first = group.rollout_batch_async(env_batch(1))  # worker 0 (both idle)
    second = group.rollout_batch_async(env_batch(1))  # worker 1 (worker 0 busy)
    third = group.rollout_batch_async(env_batch(1))  # both busy once: round robin -> worker 0
    assert all(is_object_ref(v) for b in (first, second, third) for v in b.values())
    assert group.stats()["rollout_workers"][0]["outstanding"] == 2
    e0.call("open_gate")
    done = resolve(list(first.values()) + list(third.values()))
    assert [int(r.action[0]) for r in done] == [0, 0]
    fourth = group.rollout_batch_async(env_batch(2))  # worker 1 still busy -> worker 0 takes the whole batch
    assert [int(r.action[0]) for r in resolve(list(fourth.values()))] == [0, 0]
    e1.call("open_gate")
    assert int(resolve(list(second.values()))[0].action[0]) == 1


@pytest.mark.ray
def test_ray_rollout_batch_accepts_object_refs_and_returns_responses(async_echo_group, ray_runtime):
    group = async_echo_group
    group.construct_network(DISCRETE_META)
    batch = env_batch(3)
    refs = BatchedData(list(batch.ids()), [ray_runtime.put(v) for v in batch.values()])
    assert refs.is_future
    out = group.rollout_batch(refs)
    assert out.ids() == batch.ids()
    assert all(isinstance(r, PolicyResponse) for r in out.values())
    assert [r.env_id for r in out.values()] == list(batch.ids())


def test_local_rollout_batch_async_returns_responses_at_once():

    config = PolicyConfig(rollout_mode="async")
    group = PolicyGroup([EchoPolicy(config)], [EchoPolicy(config, worker_index=1)], config)
    group.construct_network(DISCRETE_META)
    out = group.rollout_batch_async(env_batch(2))
    assert all(isinstance(r, PolicyResponse) for r in out.values())
    assert not out.is_future


@pytest.mark.ray
def test_local_workers_resolve_object_refs_first(ray_runtime):

    config = PolicyConfig()
    group = PolicyGroup([EchoPolicy(config)], [EchoPolicy(config, worker_index=1)], config)
    group.construct_network(DISCRETE_META)
    batch = env_batch(2)
    refs = BatchedData(list(batch.ids()), [ray_runtime.put(v) for v in batch.values()])
    out = group.rollout_batch(refs)
    assert [r.env_id for r in out.values()] == list(batch.ids())
