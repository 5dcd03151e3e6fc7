import pytest
import torch
from tensordict import TensorDict

from rlightning.buffer.sharding import as_items, cat_parts, pair_items, split_batch
from rlightning.types import BatchedData, EnvRet, PolicyResponse


def test_split_batch_proportional_and_capped():
    assert split_batch(10, [30, 10], "w") == [8, 2]
    assert split_batch(5, [1, 100], "w") == [0, 5]
    assert split_batch(4, [1, 1, 1, 1], "w") == [1, 1, 1, 1]
    assert sum(split_batch(7, [3, 3, 3], "w")) == 7
    with pytest.raises(ValueError, match=r"cannot sample batch_size=9: train worker 0's shards hold 8 items"):
        split_batch(9, [4, 4], "train worker 0's shards")


def test_pairing_by_id():
    e = [EnvRet("a", 0), EnvRet("b", 0)]
    r = [PolicyResponse("b", action=1), PolicyResponse("a", action=2)]
    pairs = pair_items(as_items(e, "e"), as_items(BatchedData(["b", "a"], r), "r"))
    assert [(i, resp.action) for i, _, resp in pairs] == [("a", 2), ("b", 1)]
    with pytest.raises(ValueError, match=r"EnvRet ids \['a', 'b'\] and PolicyResponse ids \['a'\] differ"):
        pair_items(as_items(e, "e"), as_items(r[1:], "r"))
    with pytest.raises(TypeError, match=r"e: expected items with a string env_id, got int"):
        as_items([3], "e")


def test_cat_parts_pads_episode_batches():
    a = TensorDict({"x": torch.ones(2, 3), "mask": torch.ones(2, 3, dtype=torch.bool)}, [2, 3])
    b = TensorDict({"x": torch.ones(1, 5), "mask": torch.ones(1, 5, dtype=torch.bool)}, [1, 5])
    out = cat_parts([a, b, TensorDict({}, [0])])
    assert tuple(out.batch_size) == (3, 5) and out["mask"].sum().item() == 11
    assert cat_parts([]).batch_size[0] == 0
