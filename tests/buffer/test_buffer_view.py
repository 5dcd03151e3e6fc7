import pytest
import torch
from tensordict import TensorDict

from rlightning.buffer.utils import BufferView


def make_view(n=10):
    return BufferView(TensorDict({"obs": torch.arange(n).float().unsqueeze(1), "a": torch.arange(n)}, [n]))


def test_len_index_slice_iterate():
    v = make_view()
    assert len(v) == 10 and sorted(v.keys()) == ["a", "obs"] and "a" in v
    assert v[3]["a"].item() == 3 and v[-1]["a"].item() == 9
    assert v[2:5]["a"].tolist() == [2, 3, 4]
    assert v[torch.tensor([1, 7])]["a"].tolist() == [1, 7]
    assert [r["a"].item() for r in v] == list(range(10))
    batches = list(v.iter_batches(4))
    assert [b.batch_size[0] for b in batches] == [4, 4, 2]
    assert [b.batch_size[0] for b in v.iter_batches(4, drop_last=True)] == [4, 4]
    shuffled = torch.cat([b["a"] for b in v.iter_batches(3, shuffle=True, generator=torch.Generator().manual_seed(0))])
    assert sorted(shuffled.tolist()) == list(range(10)) and shuffled.tolist() != list(range(10))
    with pytest.raises(IndexError, match=r"BufferView index 10 is out of range for length 10"):
        v[10]
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer, got 0"):
        next(v.iter_batches(0))


def test_torch_dataset_and_dataloader():
    v = make_view()
    ds = v.as_dataset()
    assert len(ds) == 10 and ds[4]["a"].item() == 4
    loader = v.dataloader(batch_size=4, shuffle=False)
    assert [b["a"].tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]


def test_every_write_raises():
    v = make_view()
    for write in (
        lambda: v.__setitem__("a", torch.zeros(10)),
        lambda: v.__delitem__("a"),
        lambda: v.set("a", torch.zeros(10)),
        lambda: v.update({}),
        lambda: v.extend(None),
        lambda: setattr(v, "x", 1),
    ):
        with pytest.raises(TypeError, match="BufferView is read-only"):
            write()
    with pytest.raises(RuntimeError):
        v[0:3].set("new", torch.zeros(3))  # returned TensorDicts are locked
    column = v["a"]
    column.zero_()
    assert v["a"].tolist() == list(range(10))  # columns come back as copies
    copy = v.to_tensordict()
    copy.set("new", torch.zeros(10))
    assert "new" not in v


def test_constructor_checks():
    with pytest.raises(TypeError, match=r"BufferView wraps a TensorDict, got dict"):
        BufferView({"a": torch.zeros(2)})
    with pytest.raises(ValueError, match=r"needs a TensorDict with a batch dimension"):
        BufferView(TensorDict({"a": torch.zeros(2)}, []))
