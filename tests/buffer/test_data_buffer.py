import logging

import numpy as np
import pytest
import torch

from rlightning.buffer import DataBuffer, ReplayBuffer, RolloutBuffer
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from rlightning.types import BatchedData
from rlightning.utils.config import BufferConfig
from rlightning.utils.ray.handle import WorkerHandle
from tests.support.buffer_fakes import FakeVecEnv, check_transitions, respond


def make_envs(n=3, num_envs=2, lengths=(3, 4)):
    return [FakeVecEnv(f"Fake-{i}", num_envs=num_envs, lengths=lengths, tag=i) for i in range(n)]


def run(buffer, envs, steps, rets=None):
    rets = rets or [e.reset() for e in envs]
    for _ in range(steps):
        resps = [respond(r) for r in rets]
        buffer.add_batched_transition(
            BatchedData([r.env_id for r in rets], rets), BatchedData([r.env_id for r in resps], resps)
        )
        rets = [e.step(r.action) for e, r in zip(envs, resps)]
    return rets


def test_routes_envs_to_shards_and_samples_per_train_worker():
    envs = make_envs(3)
    buf = ReplayBuffer(config=BufferConfig(capacity=500, seed=0))
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=4)
    assert buf.episode_table.get_env_to_storage() == {"Fake-0": 0, "Fake-1": 1, "Fake-2": 0}
    run(buf, envs, 20)
    buf.truncate_episodes()
    data = buf.get_data()
    for tag in range(3):
        check_transitions(data[data["obs"][:, 4] == tag], envs[0].lengths)
    batches = buf.sample(16)
    assert len(batches) == 4 and all(b.batch_size[0] == 16 for b in batches)
    for w, b in enumerate(batches):
        tags = set(b["obs"][:, 4].long().tolist())
        assert tags <= ({0, 2} if w < 2 else {1})  # workers 0, 1 read shard 0; workers 2, 3 read shard 1
    assert len(buf) == buf.get_size() == len(data)
    with pytest.raises(
        ValueError, match=rf"batch_size=999 for train workers \[0, 1\]: storage shard 0 holds {buf._sizes[0]}"
    ):
        buf.sample(999)


def test_one_call_per_shard_per_step(monkeypatch):
    calls = []
    original = WorkerHandle.submit

    def spy(self, method, *args, **kwargs):
        calls.append(method)
        return original(self, method, *args, **kwargs)

    envs = make_envs(5)
    buf = ReplayBuffer(config=BufferConfig(capacity=100))
    buf.init([e.meta for e in envs], num_storages=2)
    monkeypatch.setattr(WorkerHandle, "submit", spy)
    run(buf, envs, 3)
    assert calls == ["add_transitions_flat"] * 6


def test_single_worker_draws_from_both_shards_in_proportion():
    envs = make_envs(2, lengths=(2, 2))
    buf = ReplayBuffer(config=BufferConfig(capacity=500, seed=1))
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=1)
    run(buf, envs, 12)
    (batch,) = buf.sample(20)
    assert batch.batch_size[0] == 20 and set(batch["obs"][:, 4].long().tolist()) == {0, 1}
    with pytest.raises(
        ValueError, match=rf"cannot sample batch_size=999: train worker 0's shards \[0, 1\] hold {len(buf)}"
    ):
        buf.sample(999)
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer, got None"):
        buf.sample()
    everyone = RolloutBuffer(config=BufferConfig(capacity=500, sampler="all", seed=1))
    everyone.init([e.meta for e in envs], num_storages=2, num_train_workers=1)
    run(everyone, make_envs(2, lengths=(2, 2)), 12)
    total = len(everyone)
    (everything,) = everyone.sample()
    tags = everything["obs"][:, 4].long()
    assert len(tags) == total and 0 < int(tags[: total // 2].sum()) < total // 2  # both shards, shuffled together


def test_rollout_buffer_all_sampler_consumes_and_gae():
    envs = make_envs(2)
    buf = RolloutBuffer(
        config=BufferConfig(capacity=500, sampler="all"), postprocess_fn=make_gae_postprocess_fn(0.99, 0.95)
    )
    buf.init([e.meta for e in envs], num_storages=1, num_train_workers=2)
    rets = run(buf, envs, 10)
    buf.truncate_episodes([e.env_id for e in envs])
    total = buf.size
    parts = buf.sample()
    assert sum(p.batch_size[0] for p in parts) == total and abs(parts[0].batch_size[0] - parts[1].batch_size[0]) <= 1
    assert {"advantage", "return", "log_prob", "value"} <= set(parts[0].keys())
    assert len(buf) == 0 and buf.get_size() == 0
    run(buf, envs, 5, rets)  # the next iteration starts fresh episodes
    buf.truncate_episodes()
    assert 0 < buf.get_size() <= 2 * 2 * 4


def test_rollout_buffer_warns_without_all_sampler(caplog):
    caplog.set_level(logging.WARNING, logger="rlightning")
    RolloutBuffer(config=BufferConfig(sampler="uniform"))
    assert "usually wants sampler='all'" in caplog.text


def test_errors_name_env_and_keep_data():
    envs = make_envs(2)
    buf = ReplayBuffer(config=BufferConfig(capacity=500))
    with pytest.raises(RuntimeError, match=r"call buffer.init\(env_meta_list\) first"):
        buf.sample(1)
    buf.init([e.meta for e in envs], num_storages=2)
    rets = run(buf, envs, 6)
    before = buf.get_data()
    with pytest.raises(KeyError, match=r"unknown env 'ghost': the buffer knows \['Fake-0', 'Fake-1'\]"):
        buf.truncate_episodes(["Fake-0", "ghost"])
    bad = rets[0]
    bad.observation = bad.observation.astype(np.float64)
    good = rets[1]
    with pytest.raises(ValueError, match=r"env 'Fake-0': observation has shape \(2, 5\) and dtype float64"):
        buf.add_batched_transition([bad, good], [respond(bad), respond(good)])
    after = buf.get_data()
    assert len(after) >= len(before)  # the valid step of Fake-1 went in; nothing was lost
    with pytest.raises(ValueError, match=r"EnvRet ids \['Fake-0'\] and PolicyResponse ids \['Fake-1'\] differ"):
        buf.add_batched_transition([rets[0]], [respond(rets[1])])
    with pytest.raises(ValueError, match=r"cannot split 3 train workers evenly over 2 storage shards"):
        buf.init([e.meta for e in envs], num_storages=2, num_train_workers=3)
    with pytest.raises(ValueError, match=r"num_storages must be an integer >= 1, got 0"):
        buf.init([], num_storages=0)
    with pytest.raises(TypeError, match=r"config must be a BufferConfig, got int"):
        DataBuffer(config=3)


def test_async_add_episode_priorities_stats_and_views():
    envs = make_envs(2, lengths=(2, 3))
    buf = ReplayBuffer(config=BufferConfig(capacity=200, sampler="prioritized", seed=0))
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=1)
    rets = [e.reset() for e in envs]
    for _ in range(8):
        resps = [respond(r) for r in rets]
        buf.add_batched_data_async(BatchedData([r.env_id for r in resps], resps))  # answers first
        buf.add_batched_data_async(BatchedData([r.env_id for r in rets], rets))
        rets = [e.step(r.action) for e, r in zip(envs, resps)]
    size = buf.get_size()
    assert size > 0
    ep = {
        "obs": torch.zeros(4, 1, 5),
        "action": torch.zeros(3, 1, dtype=torch.int64),
        "reward": torch.ones(3, 1),
        "log_prob": torch.zeros(3, 1),
        "value": torch.zeros(3, 1),
    }
    buf.add_episode(ep, num_envs=1)
    assert buf.size == size + 3
    (batch,) = buf.sample(8)
    assert {"_index", "_shard", "_weight"} <= set(batch.keys())
    buf.update_priorities(batch, torch.rand(8))
    stats = buf.stats()
    for key in ("shards", "size", "capacity", "episodes_stored", "recent_episodes", "adds_per_sec"):
        assert key in stats
    assert [set(s) >= {"size", "capacity", "episodes", "transitions"} for s in stats["shards"]] == [True, True]
    assert stats["size"] == size + 3 and stats["capacity"] == 400
    assert {r["env_id"] for r in stats["recent_episodes"]} >= {"Fake-0/0", "Fake-1/1", "episode"}
    rows = buf.sample_rows(3)
    assert rows.batch_size[0] == 3 and "obs" in rows.keys()
    assert len(buf.view()) == buf.size
    timing = buf.timing_summary()
    assert len(timing["shards"]) == 2 and "sample" in timing["buffer"]
    buf.clear()
    assert buf.size == 0 and buf.stats()["size"] == 0


def test_normalize_obs_config_wraps_preprocessor():
    env = FakeVecEnv(num_envs=4, lengths=(5, 6, 7, 8))
    buf = ReplayBuffer(config=BufferConfig(capacity=500, normalize_obs=True, normalize_reward=True))
    buf.init([env.meta])
    run(buf, [env], 30)
    data = buf.get_data()
    # Column 0 is the row (0..3 in every batch): normalised it is always the same four values.
    assert torch.allclose(data["obs"][:, 0].unique(), torch.tensor([-1.3416, -0.4472, 0.4472, 1.3416]), atol=1e-3)
    raw_row0 = torch.tensor([1.0, 2.0, 3.0, 4.0])  # rewards of row 0 before scaling
    assert not torch.isin(data["reward"][data["obs"][:, 0] < -1][:4], raw_row0).all()
    assert (data["reward"] >= 0).all()  # scaled by the std only, never centred
