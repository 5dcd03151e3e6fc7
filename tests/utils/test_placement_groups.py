"""Node placement helpers without a cluster: shard placement, the distribution, affinity options, config fields."""

from __future__ import annotations

import pytest

from rlightning.buffer.utils import EpisodeTable
from rlightning.utils.config import MainConfig
from rlightning.utils.ray.placement_groups import (
    TrainPlacement,
    actor_node_ids,
    buffer_placement,
    component_distribution,
    node_affinity_options,
    storage_nodes_for,
)


def test_shards_follow_the_env_workers_nodes_in_proportion():
    assert storage_nodes_for(["a", "b"], 2) == ["a", "b"]
    assert storage_nodes_for(["a", "a", "a", "b"], 2) == ["a", "b"]
    assert sorted(storage_nodes_for(["a", "a", "a", "b"], 4)) == ["a", "a", "a", "b"]
    assert storage_nodes_for(["a", "b", "c"], 2) == ["a", "b"]  # more nodes than shards: the first by name
    assert storage_nodes_for(["b", "a", "a"], 1) == ["a"]  # the node with the most env workers
    assert storage_nodes_for([], 2) == [None, None]


def test_storage_nodes_for_rejects_a_bad_count():
    with pytest.raises(ValueError, match="num_storages must be an integer >= 1, got 0"):
        storage_nodes_for(["a"], 0)


def test_the_distribution_binds_envs_and_train_workers_to_shards_on_their_node():
    envs = {"e0": "a", "e1": "b", "e2": "a"}
    storage = storage_nodes_for(list(envs.values()), 2)
    dist = component_distribution(envs, storage, ["b", "a"])
    table = EpisodeTable(2, list(envs), 2, dist, node_affinity_env=True, node_affinity_train=True)
    for env_id, node in envs.items():
        assert storage[table.get_storage_idx_for_env(env_id)] == node
    for worker, node in enumerate(["b", "a"]):
        assert {storage[s] for s in table.get_storages_for_train_worker(worker)} == {node}


def test_node_affinity_is_soft_so_a_dead_node_is_not_insisted_on():
    assert node_affinity_options(None) == {}
    strategy = node_affinity_options("ab" * 28)["scheduling_strategy"]
    assert strategy.node_id == "ab" * 28
    assert strategy.soft is True


def test_local_workers_report_no_node_without_ray(monkeypatch):
    import ray

    monkeypatch.setattr(ray, "is_initialized", lambda: False)  # whether or not another test started one
    assert actor_node_ids([object(), object()]) == [None, None]


def test_local_workers_report_the_drivers_node_with_ray(monkeypatch):
    import ray

    import rlightning.utils.ray.placement_groups as pg

    monkeypatch.setattr(ray, "is_initialized", lambda: True)
    monkeypatch.setattr(pg, "_node_id", lambda: "driver-node")
    assert actor_node_ids([object(), object()]) == ["driver-node", "driver-node"]


def test_placement_group_strategy_is_checked():
    with pytest.raises(ValueError, match="strategy 'BOTH' is not one of"):
        TrainPlacement(2, strategy="BOTH")


def test_config_fields_for_placement():
    cfg = MainConfig.model_validate(
        {
            "env": {"resources": {"node_a": 1}},
            "cluster": {"train_resources": {"node_b": 1}, "train_placement": "SPREAD", "remote_storage": True},
            "buffer": {"node_affinity_env": True, "node_affinity_train": True},
        }
    )
    assert cfg.env.resources == {"node_a": 1.0}
    assert cfg.cluster.train_placement == "SPREAD"
    with pytest.raises(ValueError, match="PACK', 'SPREAD'"):
        MainConfig.model_validate({"cluster": {"train_placement": "BOTH"}})


def test_without_affinity_the_buffer_gets_one_option_for_all_shards():
    cfg = MainConfig()
    assert buffer_placement(cfg, None, None) == {"storage_options": {"num_cpus": cfg.cluster.buffer_each_cpu_num}}
