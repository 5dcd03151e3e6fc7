import numpy as np
import pytest
import torch

from rlightning.buffer.utils.tensor_store import EpisodeStore, RowRing, TransitionStore, as_tensor_dict


def batch(lo, hi):
    return {"x": torch.arange(lo, hi), "y": torch.arange(lo, hi, dtype=torch.float32).unsqueeze(1).repeat(1, 2)}


def test_transition_store_wraps_in_place():
    s = TransitionStore(5, "circular", torch.device("cpu"))
    s.write(batch(0, 3), 3)
    x = s.ring.data["x"]
    s.write(batch(3, 7), 4)
    assert s.ring.data["x"] is x  # preallocated, written in place
    assert s.size == 5 and s.cursor == 2
    assert s.gather(s.ordered_slots())["x"].tolist() == [2, 3, 4, 5, 6]
    s.write(batch(10, 22), 12)
    assert s.gather(s.ordered_slots())["x"].tolist() == [17, 18, 19, 20, 21]
    s.clear()
    assert s.size == 0 and s.ordered_slots().numel() == 0


def test_ring_check_names_key_shape_dtype():
    r = RowRing(4, torch.device("cpu"))
    r.allocate(batch(0, 2))
    with pytest.raises(
        ValueError, match=r"src: key 'y' has shape \(3,\) and dtype torch.float32, expected shape \(2,\)"
    ):
        r.check({"x": torch.arange(2), "y": torch.zeros(2, 3)}, "src")
    with pytest.raises(
        ValueError, match=r"src: transition keys differ from the storage's: missing \['y'\], unexpected"
    ):
        r.check({"x": torch.arange(2)}, "src")
    with pytest.raises(ValueError, match=r"key 'y' has 1 rows, other keys have 2"):
        r.check({"x": torch.arange(2), "y": torch.zeros(1, 2)}, "src")


def test_episode_store_evicts_whole_episodes_and_grows():
    s = EpisodeStore(2, "circular", torch.device("cpu"), initial_rows=4)
    s.write(batch(0, 3), np.array([3]))
    s.write(batch(10, 15), np.array([2, 3]))  # evicts the first; needs to grow
    assert s.size == 2 and s.num_transitions == 5 and s.ring.rows >= 5
    assert s.ring.gather(s.ordered_rows())["x"].tolist() == [10, 11, 12, 13, 14]
    out = s.gather(torch.tensor([1, 0]))  # slot 0 was reused by the newest episode
    assert out["mask"].tolist() == [[True, True, False], [True, True, True]]
    assert out["x"].tolist() == [[10, 11, 11], [12, 13, 14]]


def test_as_tensor_dict_zero_copy_and_type_error():
    a = np.arange(3)
    assert as_tensor_dict({"a": a})["a"].data_ptr() == torch.from_numpy(a).data_ptr()
    with pytest.raises(TypeError, match=r"transition key 'a' must be a tensor or an array, got list"):
        as_tensor_dict({"a": [1, 2]})


def test_pack_unpack_round_trip_copies_read_only_arrays():
    from tensordict import TensorDict

    from rlightning.buffer.utils.tensor_store import pack_tensordicts, unpack_tensordicts

    td = TensorDict({"a": torch.arange(3), "b": torch.ones(3, 2, dtype=torch.bool)}, [3])
    packed = pack_tensordicts([[td, td[:1]], torch.arange(2), 5])
    packed[0][0]["data"]["a"].flags.writeable = False  # as if read from Ray's object store
    out = unpack_tensordicts(packed)
    assert (out[0][0] == td).all() and out[0][1].batch_size[0] == 1
    assert out[1].tolist() == [0, 1] and out[2] == 5
    out[0][0]["a"].add_(1)  # writable copies
    assert td["a"].tolist() == [0, 1, 2]
