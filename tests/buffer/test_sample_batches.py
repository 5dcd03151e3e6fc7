"""`DataBuffer.sample(batch_size, num_batches=k)`: an iteration's k uniform batches in one draw."""

import pytest
import torch

from rlightning.buffer import ReplayBuffer
from rlightning.buffer.sharding import split_batch
from rlightning.buffer.utils import Storage
from rlightning.utils.config import BufferConfig
from tests.buffer.test_data_buffer import run
from tests.support.buffer_fakes import FakeVecEnv

K, B = 5, 12


def filled(sampler="uniform", num_storages=2, num_train_workers=1, remote=False, seed=3):
    """Fake-0 and Fake-2 write to shard 0, Fake-1 to shard 1 (their tag is obs column 4)."""
    envs = [FakeVecEnv(f"Fake-{i}", num_envs=2, lengths=(3, 4), tag=i) for i in range(3)]
    options = {"storage_options": {"num_cpus": 0.25}} if remote else {}
    buf = ReplayBuffer(config=BufferConfig(capacity=500, sampler=sampler, seed=seed), remote=remote)
    buf.init([e.meta for e in envs], num_storages=num_storages, num_train_workers=num_train_workers, **options)
    run(buf, envs, 10)
    buf.truncate_episodes()
    return buf


def check_shares(buf, batches):
    """Every batch of B rows holds each shard's share, as one sample(B) would."""
    sizes = buf.shards.sizes
    shares = split_batch(B, sizes, "test")
    for batch in batches:
        assert batch.batch_size[0] == K * B
        from_shard1 = (batch["obs"][:, 4] == 1).reshape(K, B).sum(1)
        assert from_shard1.tolist() == [shares[1]] * K


def test_one_local_shard_draws_the_k_batches_in_one_go():
    a, b = filled(num_storages=1), filled(num_storages=1)
    (many,) = a.sample(B, num_batches=K)
    singles = [b.sample(B)[0] for _ in range(K)]
    assert many.batch_size[0] == K * B
    # The same generator draws the same slots whether asked once for K * B or K times for B.
    assert torch.equal(many["obs"], torch.cat([s["obs"] for s in singles]))


def test_batches_take_each_shards_share():
    buf = filled()
    check_shares(buf, buf.sample(B, num_batches=K))
    two = filled(num_train_workers=2)
    assert [x.batch_size[0] for x in two.sample(B, num_batches=K)] == [K * B, K * B]


def test_a_batch_may_hold_more_rows_than_one_batch_but_not_a_batch_more_than_stored():
    buf = filled(num_storages=1)
    size = buf.get_size()
    (many,) = buf.sample(size, num_batches=3)  # with replacement: 3 x size rows of size stored
    assert many.batch_size[0] == 3 * size
    with pytest.raises(ValueError, match=rf"cannot sample batch_size={size + 1}"):
        buf.sample(size + 1, num_batches=2)


@pytest.mark.parametrize("sampler", ["prioritized", "batch"])
def test_other_samplers_refuse_several_batches(sampler):
    buf = filled(sampler)
    with pytest.raises(ValueError, match=rf"only the 'uniform' sampler can; this buffer uses '{sampler}'"):
        buf.sample(B, num_batches=2)
    with pytest.raises(ValueError, match=r"num_batches must be a positive integer, got 0"):
        buf.sample(B, num_batches=0)
    storage = Storage(capacity=10, sampler=sampler)
    with pytest.raises(ValueError, match=r"only the 'uniform' sampler can"):
        storage.sample_parts(1, 2, False, 3)


@pytest.mark.ray
def test_ray_sharded_buffer_draws_the_k_batches_with_each_shards_share(ray_runtime):
    buf = filled(remote=True)
    try:
        assert buf.is_remote
        check_shares(buf, buf.sample(B, num_batches=K))
    finally:
        buf.close()
