import pytest

from rlightning.buffer.utils import EpisodeTable


def test_least_loaded_round_robin_and_stable():
    t = EpisodeTable(2, ["a", "b", "c"])
    assert t.get_env_to_storage() == {"a": 0, "b": 1, "c": 0}
    assert t.get_storage_idx_for_env("d") == 1
    assert t.get_storage_idx_for_env("a") == 0  # stable after first sight
    t.register_envs(["e", "a"])
    assert t.get_envs_for_storage(0) == ["a", "c", "e"] and t.get_envs_for_storage(1) == ["b", "d"]
    assert EpisodeTable(3, ["x", "y", "z", "w"]).get_env_to_storage() == {"x": 0, "y": 1, "z": 2, "w": 0}


def test_train_workers_in_contiguous_even_blocks():
    assert EpisodeTable(2, num_train_workers=4).get_storage_to_train_workers() == {0: [0, 1], 1: [2, 3]}
    t = EpisodeTable(2, num_train_workers=1)
    assert t.get_storage_to_train_workers() == {0: [0], 1: [0]}
    assert t.get_storages_for_train_worker(0) == [0, 1]
    assert EpisodeTable(4, num_train_workers=2).get_storage_to_train_workers() == {0: [0], 1: [0], 2: [1], 3: [1]}
    assert EpisodeTable(2).get_train_workers(1) == []
    with pytest.raises(ValueError, match=r"cannot split 3 train workers evenly over 2 storage shards"):
        EpisodeTable(2, num_train_workers=3)


def test_errors():
    with pytest.raises(ValueError, match=r"num_storages must be an integer >= 1, got 0"):
        EpisodeTable(0)
    t = EpisodeTable(2, num_train_workers=2)
    with pytest.raises(IndexError, match=r"storage index 2 is out of range \[0, 2\)"):
        t.get_train_workers(2)
    with pytest.raises(IndexError, match=r"storage index -1 is out of range"):
        t.get_envs_for_storage(-1)
    with pytest.raises(IndexError, match=r"train worker index 5 is out of range \[0, 2\)"):
        t.get_storages_for_train_worker(5)
    with pytest.raises(TypeError, match=r"register_envs expects an iterable of env ids, got the string 'abc'"):
        t.register_envs("abc")


def test_node_affinity_binds_envs_and_workers_to_local_shards():
    dist = {
        "storage": {"0": {"node_id": "A"}, "1": {"node_id": "B"}},
        "env": {"e0": {"node_id": "B"}, "e1": {"node_id": "B"}, "e2": {"node_ip": "A"}, "e3": {}},
        "train": {"0": {"node_id": "B"}, "1": {"node_id": "A"}},
    }
    t = EpisodeTable(2, ["e0", "e1", "e2", "e3"], 2, dist, node_affinity_env=True, node_affinity_train=True)
    assert t.get_env_to_storage() == {"e0": 1, "e1": 1, "e2": 0, "e3": 0}
    assert t.get_storage_to_train_workers() == {0: [1], 1: [0]}
    plain = EpisodeTable(2, ["e0", "e1"], 2, dist)
    assert plain.get_env_to_storage() == {"e0": 0, "e1": 1}  # affinity off: load balance only
    snap = t.snapshot()
    assert snap["storage_load"] == [2, 2] and snap["env_to_storage"]["e2"] == 0
