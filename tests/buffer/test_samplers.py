import numpy as np
import pytest
import torch

from rlightning.buffer.utils import Storage
from rlightning.buffer.utils.samplers import (
    AllSampler,
    BatchSampler,
    PrioritizedSampler,
    SumTree,
    UniformSampler,
    make_sampler,
)


def test_uniform_all_batch():
    idx, extra = UniformSampler(10, seed=0).sample(1000, 7)
    assert extra == {} and idx.min() >= 0 and idx.max() == 6
    assert sorted(AllSampler(10, seed=0).sample(3, 7)[0].tolist()) == list(range(7))
    b = BatchSampler(10, seed=0)
    epoch = torch.cat([b.sample(3, 9)[0] for _ in range(3)])
    assert sorted(epoch.tolist()) == list(range(9))  # one epoch covers every slot once
    assert len(set(b.sample(9, 9)[0].tolist())) == 9


def test_sum_tree_sets_and_finds():
    tree = SumTree(5)
    tree.set(np.array([0, 1, 2, 3, 4]), np.array([1.0, 0.0, 2.0, 0.0, 1.0]))
    assert tree.total == 4.0
    assert tree.find(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 3.99])).tolist() == [0, 0, 2, 2, 4, 4]
    tree.set(np.array([2, 2]), np.array([5.0, 0.5]))  # the later duplicate wins
    assert tree.total == 2.5
    with pytest.raises(IndexError, match=r"SumTree index out of range \[0, 5\)"):
        tree.set(np.array([5]), np.array([1.0]))


def test_prioritized_follows_priorities_and_weights():
    s = PrioritizedSampler(8, alpha=1.0, beta=1.0, seed=0)
    s.on_write(torch.arange(4))
    s.update_priorities(torch.tensor([0, 1, 2, 3]), torch.tensor([0.0, 0.0, 3.0, 1.0]))
    idx, extra = s.sample(4000, 4)
    counts = np.bincount(idx.numpy(), minlength=4)
    assert counts[0] < 10 and counts[1] < 10 and 2.5 < counts[2] / counts[3] < 3.6
    w = extra["_weight"]
    assert float(w.max()) == 1.0 and float(w[idx == 3].mean()) > float(w[idx == 2].mean())
    with pytest.raises(ValueError, match=r"priorities must be finite and >= 0"):
        s.update_priorities(torch.tensor([0]), torch.tensor([-1.0]))
    with pytest.raises(ValueError, match=r"got 2 indices and 1 priorities"):
        s.update_priorities(torch.tensor([0, 1]), torch.tensor([1.0]))


def test_make_sampler_names():
    assert isinstance(make_sampler("batch", 4), BatchSampler)
    with pytest.raises(KeyError, match=r"unknown sampler 'x'; valid samplers: uniform, all, batch, prioritized"):
        make_sampler("x", 4)


def test_storage_prioritized_round_trip():
    st = Storage(16, sampler="prioritized", priority_alpha=1.0, seed=0)
    st.extend({"x": torch.arange(10)})
    batch = st.sample(10)
    assert set(batch.keys()) == {"x", "_index", "_weight"}
    assert (batch["x"] == batch["_index"]).all()
    st.update_priorities(torch.arange(10), torch.tensor([0.0] * 9 + [1.0]))
    drawn = torch.cat([st.sample(10)["x"] for _ in range(10)])
    assert (drawn == 9).float().mean() > 0.95
    with pytest.raises(IndexError, match=r"update_priorities: index out of range \[0, 10\): 0..12"):
        st.update_priorities(torch.tensor([0, 12]), torch.tensor([1.0, 1.0]))
    plain = Storage(4)
    with pytest.raises(ValueError, match=r"update_priorities needs sampler='prioritized'; this storage uses 'uniform'"):
        plain.update_priorities([0], [1.0])


def test_storage_all_sampler_splits_parts_and_clears():
    st = Storage(100, sampler="all", seed=1)
    st.extend({"x": torch.arange(10)})
    parts = st.sample_parts(3, None, clear_after=True)
    assert [p.batch_size[0] for p in parts] == [4, 3, 3]
    assert sorted(torch.cat([p["x"] for p in parts]).tolist()) == list(range(10))
    assert len(st) == 0
