"""The sharded buffer with storage shards as Ray actors (same code path as local shards)."""

import pytest

from rlightning.buffer import ReplayBuffer, RolloutBuffer
from rlightning.buffer import shard_recovery as shard_module
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from rlightning.types import BatchedData, is_object_ref
from rlightning.utils.config import BufferConfig
from tests.support.buffer_fakes import FakeVecEnv, check_transitions, respond

pytestmark = pytest.mark.ray

OPTIONS = {"num_cpus": 0.25}


def make_envs(n=3):
    return [FakeVecEnv(f"Fake-{i}", num_envs=2, lengths=(3, 4), tag=i) for i in range(n)]


def test_remote_shards_take_refs_and_sample_per_worker(ray_runtime, remote_flags, monkeypatch):
    remote_flags(REMOTE_STORAGE=True)
    envs = make_envs(3)
    buf = ReplayBuffer(config=BufferConfig(capacity=300, seed=0))
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=2, storage_options=OPTIONS)
    try:
        assert buf.is_remote and buf.num_storages == 2
        resolved = []
        original = shard_module.resolve  # the shard set makes the calls (DataBuffer routes)
        monkeypatch.setattr(shard_module, "resolve", lambda xs, **kw: resolved.append(list(xs)) or original(xs))
        put = []
        rets = [e.reset() for e in envs]
        for _ in range(12):
            resps = [respond(r) for r in rets]
            ret_refs = [ray_runtime.put(r) for r in rets]
            resp_refs = [ray_runtime.put(r) for r in resps]
            put += ret_refs + resp_refs
            ids = [r.env_id for r in rets]
            buf.add_batched_transition(BatchedData(ids, ret_refs), BatchedData(ids, resp_refs))
            rets = [e.step(r.action) for e, r in zip(envs, resps)]
        # The driver only waited on the shards' replies: the data refs went to the actors unresolved.
        passed = {x for call in resolved for x in call if is_object_ref(x)}
        assert not passed & set(put)
        assert all(len(call) == 2 for call in resolved)  # one reply per shard per step
        buf.truncate_episodes()
        data = buf.get_data()
        for tag in range(3):
            check_transitions(data[data["obs"][:, 4] == tag], envs[0].lengths)
        batches = buf.sample(10)
        assert [set(b["obs"][:, 4].long().tolist()) <= s for b, s in zip(batches, ({0, 2}, {1}))] == [True, True]
        stats = buf.stats()
        assert stats["remote"] and [s["env_ids"] for s in stats["shards"]] == [["Fake-0", "Fake-2"], ["Fake-1"]]
        bad = envs[0].step()
        resp = respond(bad)
        bad.observation = bad.observation[:, :2]
        with pytest.raises(ValueError, match=r"env 'Fake-0': observation has shape \(2, 2\)"):
            buf.add_transition(bad, resp)  # the actor's ValueError reaches the caller as a ValueError
        with pytest.raises(KeyError, match=r"unknown env 'ghost'"):
            buf.truncate_episodes(["ghost"])
        assert buf.get_size() == len(data)
    finally:
        buf.close()


def test_remote_rollout_buffer_gae_and_clear(ray_runtime, remote_flags):
    remote_flags(REMOTE_STORAGE=True)
    envs = make_envs(2)
    buf = RolloutBuffer(
        config=BufferConfig(capacity=300, sampler="all"), postprocess_fn=make_gae_postprocess_fn(0.9, 0.9)
    )
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=2, storage_options=OPTIONS)
    try:
        rets = [e.reset() for e in envs]
        for _ in range(8):
            resps = [respond(r) for r in rets]
            buf.add_batched_transition(rets, resps)
            rets = [e.step(r.action) for e, r in zip(envs, resps)]
        buf.truncate_episodes()
        total = buf.size
        parts = buf.sample()
        assert sum(p.batch_size[0] for p in parts) == total > 0 and "advantage" in parts[0].keys()
        assert buf.get_size() == 0
    finally:
        buf.close()


def test_remote_shards_take_records(ray_runtime, remote_flags):
    from tests.buffer.test_storage_write import _chunks, _records

    remote_flags(REMOTE_STORAGE=True)
    envs = make_envs(3)
    buf = ReplayBuffer(config=BufferConfig(capacity=300, seed=0))
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=2, storage_options=OPTIONS)
    try:
        chunks = [_chunks(_records(e, 12), 6) for e in envs]
        for step in range(2):
            buf.add_rollouts([c[step] for c in chunks])
        data = buf.get_data()
        for tag in range(3):
            assert check_transitions(data[data["obs"][:, 4] == tag], envs[0].lengths) == 0
        assert len(data) == buf.get_size() > 0
        bad = chunks[0][0].clone()
        bad["next", "reward"] = bad["next", "reward"].double()
        with pytest.raises(ValueError, match=r"'next.reward' has dtype float64, expected float32"):
            buf.add_rollout(bad)  # the actor's ValueError reaches the caller as a ValueError
        assert buf.get_size() == len(data)
    finally:
        buf.close()
