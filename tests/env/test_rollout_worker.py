"""Tests of rlightning/env/inference.py: env workers acting with their own policy copy (local workers)."""

import numpy as np
import pytest

from rlightning.env import EnvGroup
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import BatchedData
from rlightning.utils.config import EnvConfig, PolicyConfig


@pytest.fixture
def group():
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=3), EnvConfig(name="CartPole-v1", num_envs=2)])
    metas = g.init()
    g.attach_policy(PPOPolicy, PolicyConfig(type="ppo", hidden_sizes=[16]), metas[0], seed=0)
    yield g
    g.close()


def _trained_weights(meta, version_seed=3):
    import torch

    torch.manual_seed(version_seed)
    train = PPOPolicy(PolicyConfig(type="ppo", hidden_sizes=[16]), PolicyRole.TRAIN)
    train.setup(meta)
    return train


def test_a_rollout_is_one_chain_of_steps_per_worker(group):
    batch = group.reset(seed=5)
    start = dict(batch.items())
    chunks = dict(group.collect_rollouts(batch, num_steps=6))
    assert sorted(chunks) == sorted(group.env_ids)
    for env_id, chunk in chunks.items():
        assert chunk.num_steps == 6 and len(chunk.policy_resps) == 6
        assert chunk.env_rets[0] is start[env_id]
        n = start[env_id].observation.shape[0]
        for resp in chunk.policy_resps:
            assert resp.env_id == env_id and resp.action.shape == (n,) and set(resp.action.tolist()) <= {0, 1}
            assert {"log_prob", "value"} <= set(vars(resp))
        assert chunk.last.env_id == env_id and chunk.inference_s > 0 and chunk.env_step_s > 0
    # The group counts the steps and the episode reports of every EnvRet the workers produced.
    assert group.stats()["env_steps"] == 6 * 5


def test_worker_replays_the_same_steps_as_the_env_stepped_by_hand(group):
    """A chunk's EnvRets are what the worker's own step() returns for the chunk's responses."""
    from rlightning.env import GymnasiumEnv

    env_id = group.env_ids[0]
    twin = GymnasiumEnv(EnvConfig(name="CartPole-v1", num_envs=3))
    start = group.reset(seed=11)
    np.testing.assert_array_equal(twin.reset(seed=11).observation, start[0][1].observation)
    chunk = dict(group.collect_rollouts(start, num_steps=5))[env_id]
    produced = chunk.produced_env_rets()
    for resp, expected in zip(chunk.policy_resps, produced):
        got = twin.step(resp)
        np.testing.assert_array_equal(got.observation, expected.observation)
        np.testing.assert_array_equal(got.last_reward, expected.last_reward)


def test_loaded_weights_reach_every_copy_with_their_version(group):
    train = _trained_weights(group.env_metas[0])
    group.load_policy_weights(train.get_weights(), weight_version=7)
    for worker in group.workers.values():
        assert worker.policy_weights_checksum() == train.weights_checksum()
    chunks = dict(group.collect_rollouts(group.reset(seed=0), num_steps=2))
    assert {r.weight_version for c in chunks.values() for r in c.policy_resps} == {7}


def test_bad_calls_name_what_is_wrong(group):
    start = group.reset(seed=0)
    worker = group.workers[group.env_ids[0]]
    with pytest.raises(ValueError, match=r"num_steps must be an int >= 1, got 0"):
        worker.collect_rollout(start[0][1], 0)
    with pytest.raises(ValueError, match=r"needs an EnvRet of this env, got 'CartPole-v1-1'"):
        worker.collect_rollout(start[1][1], 3)
    with pytest.raises(TypeError, match=r"attach_policy needs a BasePolicy subclass"):
        worker.attach_policy(dict, PolicyConfig(), group.env_metas[0])
    with pytest.raises(KeyError, match=r"unknown env id 'nope'"):
        list(group.collect_rollouts(BatchedData(["nope"], [start[0][1]]), 2))


def test_without_a_policy_the_group_and_worker_say_how_to_get_one():
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=2)])
    g.init()
    try:
        assert not g.has_policy
        start = g.reset(seed=0)
        with pytest.raises(RuntimeError, match=r"call attach_policy first"):
            list(g.collect_rollouts(start, 2))
        with pytest.raises(RuntimeError, match=r"load_policy_weights needs attach_policy first"):
            g.load_policy_weights({}, 1)
        with pytest.raises(RuntimeError, match=r"needs a policy in the env worker; call attach_policy"):
            g.workers[g.env_ids[0]].collect_rollout(start[0][1], 2)
    finally:
        g.close()
    assert not g.has_policy


@pytest.mark.ray
def test_ray_workers_chunks_come_in_worker_order_whichever_finishes_first(ray_runtime, remote_flags):
    """A seeded run stores the same data every time: chunks are yielded in worker order, not arrival."""
    remote_flags(REMOTE_ENV=True)
    slow, fast = EnvConfig(name="CartPole-v1", num_envs=64, num_cpus=0.25), EnvConfig(name="CartPole-v1", num_envs=1)
    g = EnvGroup([slow, fast.model_copy(update={"num_cpus": 0.25})])
    try:
        metas = g.init()
        assert g.is_remote
        g.attach_policy(PPOPolicy, PolicyConfig(type="ppo", hidden_sizes=[16]), metas[0], seed=0)
        rets = g.reset(seed=0)
        chunks = list(g.collect_rollouts(rets, 200))  # worker 0 steps 64 envs, worker 1 one: 1 is done first
        assert [env_id for env_id, _ in chunks] == g.env_ids
        assert [c.num_steps for _, c in chunks] == [200, 200]
    finally:
        g.close()
