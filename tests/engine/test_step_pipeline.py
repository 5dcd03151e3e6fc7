"""Tests of the rollout loop in flight (`run_rollout` with ``in_flight=True``): the per-step layout with one step in
flight per env worker stores what the lock-step loop stores."""

import numpy as np
import pytest
import torch

from rlightning.engine.collect import Collector
from rlightning.engine.timing import Timing
from rlightning.env import EnvGroup
from rlightning.types import BatchedData, PolicyResponse
from rlightning.utils.config import EnvConfig
from tests.support.buffer_fakes import RecordBuffer
from tests.support.env_flaky import count_lines

FLAKY = "tests.support.env_flaky:Flaky-v0"


class _Deterministic:
    """Acts from the observation (CartPole: push towards the pole's lean), with a value; counts its calls."""

    def __init__(self, stop_after=None):
        self.calls, self.stop_after, self.collector = [], stop_after, None

    def rollout_batch(self, batch):
        self.calls.append(list(batch.ids()))
        if self.stop_after is not None and len(self.calls) == self.stop_after:
            self.collector.request_stop()
        resps = []
        for env_id, ret in batch.items():
            obs = np.asarray(ret.observation, dtype=np.float32)
            action = (obs[:, -1] + obs[:, 0] > 0).astype(np.int64)
            value = obs.sum(axis=1).astype(np.float32)
            resps.append(PolicyResponse(env_id, action=action, value=value, log_prob=-value))
        return BatchedData(list(batch.ids()), resps)


def _collect(cfgs, pipelined, steps, seed, remote=False, rollouts=2, stop_after=None):
    group = EnvGroup(cfgs, remote=remote)
    group.init()
    policy, buffer = _Deterministic(stop_after), RecordBuffer()
    n = sum(c.num_envs for c in cfgs)
    collector = Collector(group, policy, buffer, Timing(), group.env_ids, n, in_env_workers=False)
    collector.pipelined = pipelined
    policy.collector = collector
    try:
        taken = [collector.collect(steps, seed=seed) for _ in range(rollouts)]
        final = [np.array(r.observation) for _, r in collector.env_rets.items()]
        return buffer, taken, policy.calls, final, group.stats()
    finally:
        group.close()


def _assert_same_records(a, b):
    assert len(a) == len(b) > 0
    for ra, rb in zip(a, b):
        assert ra.get_non_tensor("env_id") == rb.get_non_tensor("env_id")
        assert ra.batch_size == rb.batch_size
        keys = sorted(ra.keys(True, True), key=str)
        assert keys == sorted(rb.keys(True, True), key=str)
        for key in keys:
            assert torch.equal(ra[key], rb[key]), key


def _cartpoles(remote=False):
    cpus = {"num_cpus": 0.25} if remote else {}
    return [EnvConfig(name="CartPole-v1", num_envs=3, **cpus), EnvConfig(name="CartPole-v1", num_envs=2, **cpus)]


@pytest.mark.parametrize("remote", [False, pytest.param(True, marks=pytest.mark.ray)])
def test_pipelined_stepping_stores_what_lock_step_stores(request, remote):
    if remote:
        request.getfixturevalue("ray_runtime")
    lock = _collect(_cartpoles(remote), False, 40, seed=5, remote=remote)
    pipe = _collect(_cartpoles(remote), True, 40, seed=5, remote=remote)
    _assert_same_records(lock[0].records, pipe[0].records)
    assert [tuple(r.batch_size) for r in pipe[0].records] == [(3, 40), (2, 40)] * 2
    assert bool(torch.cat([r["next", "done"].flatten() for r in pipe[0].records]).any())  # episodes rolled over
    assert lock[1] == pipe[1] == [40 * 5, 40 * 5]
    for a, b in zip(lock[3], pipe[3]):  # the current EnvRets after the rollouts, in worker order
        np.testing.assert_array_equal(a, b)
    # Lock-step: one policy call per step for both workers (and one for the last values); pipelined calls
    # may cover one worker or both, but every worker is acted for once per step.
    assert all(len(c) == 2 for c in lock[2])
    assert sum(len(c) for c in pipe[2]) == sum(len(c) for c in lock[2])
    assert lock[4]["env_steps"] == pipe[4]["env_steps"] == 2 * 40 * 5


@pytest.mark.parametrize("remote", [False, pytest.param(True, marks=pytest.mark.ray)])
def test_a_worker_that_raises_mid_rollout_is_recovered_as_in_lock_step(tmp_path, request, remote):
    if remote:
        request.getfixturevalue("ray_runtime")
    cpus = {"num_cpus": 0.25} if remote else {}
    out = []
    for pipelined in (False, True):
        log = tmp_path / f"raises-{pipelined}.log"
        kwargs = {"episode_length": 4, "log_path": str(log)}
        cfgs = [
            EnvConfig(name=FLAKY, num_envs=2, max_restarts=50, env_kwargs={**kwargs, "fail_every": 7}, **cpus),
            EnvConfig(name=FLAKY, num_envs=1, max_restarts=50, env_kwargs={**kwargs, "fail_every": 0}, **cpus),
        ]
        out.append(_collect(cfgs, pipelined, 20, seed=1, remote=remote))
        assert count_lines(log, "step") >= 4  # the first worker really raised, several times per rollout
    (lock, pipe) = out
    # The raising worker's steps before each error are stored as their own record, its episodes truncated.
    ids = [r.get_non_tensor("env_id") for r in pipe[0].records]
    assert ids.count(ids[-1]) == 2 and ids.count(ids[0]) > 2
    assert pipe[0].truncated and all(t == [ids[0]] for t in pipe[0].truncated)
    assert pipe[4]["env_errors"] == lock[4]["env_errors"] and sum(pipe[4]["env_errors"].values()) >= 4
    # Flaky's observation [t, u]: u is drawn from the reset seed, and a recreated worker is reseeded the same
    # way in both loops, so the records match exactly.
    _assert_same_records(lock[0].records, pipe[0].records)
    assert lock[0].truncated == pipe[0].truncated and lock[1] == pipe[1]


def test_the_stop_flag_ends_a_pipelined_rollout_after_the_current_step():
    lock = _collect(_cartpoles(), False, 40, seed=2, rollouts=1, stop_after=6)
    pipe = _collect(_cartpoles(), True, 40, seed=2, rollouts=1, stop_after=6)
    # Local workers answer together: the sixth call's step is the last one, in both loops.
    assert [tuple(r.batch_size) for r in pipe[0].records] == [(3, 6), (2, 6)]
    assert pipe[1] == lock[1] == [6 * 5]
    _assert_same_records(lock[0].records, pipe[0].records)
