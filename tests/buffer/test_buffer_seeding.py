"""A buffer's samplers are seeded from the run's seed when ``buffer.seed`` is unset (issue 20)."""

import pytest
import torch

from rlightning.buffer import ReplayBuffer
from rlightning.buffer.sharding import shard_base_seed
from rlightning.utils.config import BufferConfig
from tests.buffer.test_data_buffer import run
from tests.support.buffer_fakes import FakeVecEnv


def make_envs(n=3):
    return [FakeVecEnv(f"Fake-{i}", num_envs=2, lengths=(3, 4), tag=i) for i in range(n)]


def draws(sampler, run_seed, buffer_seed=None, remote=False, rounds=4):
    """Fill a two-shard buffer the same way each time; return what it samples (with priorities written)."""
    envs = make_envs()
    options = {"storage_options": {"num_cpus": 0.25}} if remote else {}
    buf = ReplayBuffer(config=BufferConfig(capacity=500, sampler=sampler, seed=buffer_seed), remote=remote)
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=1, run_seed=run_seed, **options)
    try:
        run(buf, envs, 12)
        buf.truncate_episodes()
        out = []
        for i in range(rounds):
            (batch,) = buf.sample(16)
            out.append(batch["obs"].clone())
            if sampler == "prioritized":
                out.append(batch["_index"].clone())
                buf.update_priorities(batch, torch.arange(16, dtype=torch.float32) + i)
    finally:
        buf.close()
    return out


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_the_base_seed_is_the_buffer_seed_else_derived_from_the_run_seed():
    assert shard_base_seed(7, 3) == 7 == shard_base_seed(7, None)
    assert shard_base_seed(None, None) is None
    derived = shard_base_seed(None, 3)
    assert derived == shard_base_seed(None, 3)
    assert derived not in (3, shard_base_seed(None, 4))  # its own stream, not the run seed itself
    with pytest.raises(ValueError, match=r"run seed must be None or an integer >= 0, got -1"):
        shard_base_seed(None, -1)


@pytest.mark.parametrize("sampler", ["uniform", "prioritized"])
def test_two_builds_seeded_by_the_run_draw_the_same_batches(sampler):
    first = draws(sampler, run_seed=5)
    assert same(first, draws(sampler, run_seed=5))
    assert not same(first, draws(sampler, run_seed=6))
    # An explicit buffer.seed wins over the run's seed.
    assert same(draws(sampler, run_seed=5, buffer_seed=11), draws(sampler, run_seed=6, buffer_seed=11))


def test_each_shard_gets_its_own_stream():
    envs = make_envs()
    buf = ReplayBuffer(config=BufferConfig(capacity=50, sampler="prioritized"), remote=False)
    buf.init([e.meta for e in envs], num_storages=2, run_seed=5)
    base = shard_base_seed(None, 5)
    assert [s.sampler.generator.initial_seed() for s in buf.storages] == [base, base + 1]
    streams = [s.sampler._rng.integers(0, 2**31, 4).tolist() for s in buf.storages]
    assert streams[0] != streams[1]
    unseeded = ReplayBuffer(config=BufferConfig(capacity=50), remote=False)
    unseeded.init([e.meta for e in envs], num_storages=1)
    assert unseeded.storages[0].sampler.generator is None  # no seed anywhere: random draws, as before


@pytest.mark.ray
def test_remote_shards_seeded_by_the_run_draw_the_same_batches(ray_runtime):
    first = draws("prioritized", run_seed=5, remote=True, rounds=2)
    assert same(first, draws("prioritized", run_seed=5, remote=True, rounds=2))
