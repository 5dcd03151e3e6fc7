"""Weight sync strategies (rlightning/policy/weight_sync.py): the plan, and each strategy end to end."""

from __future__ import annotations

import pytest

from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.policy_group import PolicyGroup
from rlightning.policy.weight_sync import plan_weight_sync
from rlightning.utils.config import PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_batch, ppo_dataset


class FakeHandle:
    def __init__(self, is_remote: bool) -> None:
        self.is_remote = is_remote


LOCAL, REMOTE = FakeHandle(False), FakeHandle(True)


@pytest.mark.parametrize(
    ("configured", "train0", "evals", "colocated", "effective", "reason"),
    [
        ("object_store", LOCAL, [], False, "none", "no eval workers"),
        ("collective", LOCAL, [LOCAL], False, "local_copy", "all workers are in this process"),
        ("colocated", LOCAL, [LOCAL, LOCAL], False, "colocated", ""),
        ("object_store", REMOTE, [REMOTE], False, "object_store", ""),
        ("object_store", LOCAL, [REMOTE], False, "object_store", ""),
        ("collective", REMOTE, [REMOTE, REMOTE], False, "collective", ""),
        ("collective", LOCAL, [REMOTE], False, "object_store", "every eval worker to be Ray actors"),
        ("collective", REMOTE, [REMOTE], True, "object_store", "is_colocated"),
        ("colocated", REMOTE, [REMOTE], False, "object_store", "separate Ray actors"),
    ],
)
def test_plan_weight_sync(configured, train0, evals, colocated, effective, reason):
    got, why = plan_weight_sync(configured, train0, evals, colocated)
    assert got == effective
    assert reason in why
    if not reason:
        assert why == ""


def test_plan_rejects_unknown_strategy():
    with pytest.raises(ValueError, match="weight_sync='nfs' is not a weight sync strategy; use one of"):
        plan_weight_sync("nfs", LOCAL, [LOCAL])


def _train_sync_check(group: PolicyGroup, datasets) -> None:
    """Train, check eval lags, sync, check weights equal and the version advanced everywhere."""
    version = group.weight_version
    group.update_dataset(datasets)
    group.train()
    lagging = group.verify_eval_weight_consistency(raise_on_mismatch=False)
    assert [m for m in lagging["mismatched"] if m.startswith("eval")], "eval should lag before a sync"
    assert group.sync_weights() == version + 1
    report = group.verify_eval_weight_consistency()
    assert report["consistent"]
    assert set(report["versions"].values()) == {version + 1}
    out = group.rollout_batch(env_batch(2))
    assert {r.weight_version for r in out.values()} == {version + 1}


def test_colocated_strategy_copies_in_process():
    config = PolicyConfig(hidden_sizes=[16], weight_sync="colocated")
    group = PolicyGroup([PPOPolicy(config)], [PPOPolicy(config, role_type=PolicyRole.EVAL)], config)
    group.init_placement_info(is_colocated=True)
    assert group.init_weight_buffer() == "colocated"
    group.construct_network(DISCRETE_META, seed=0)
    _train_sync_check(group, [ppo_dataset()])
    assert group.stats()["weight_sync"] == {"configured": "colocated", "effective": "colocated", "reason": ""}


@pytest.mark.ray
def test_object_store_strategy_with_ray_workers(object_store_group):
    group = object_store_group
    group.construct_network(DISCRETE_META, seed=0)
    assert group.stats()["weight_sync"]["effective"] == "object_store"
    assert group.verify_eval_weight_consistency()["consistent"]
    _train_sync_check(group, [ppo_dataset()])
    _train_sync_check(group, [ppo_dataset(seed=3)])


@pytest.mark.ray
def test_collective_strategy_broadcasts_over_gloo(ddp_collective_group):
    group = ddp_collective_group
    group.construct_network(DISCRETE_META, seed=0)
    assert group.stats()["weight_sync"]["effective"] == "collective"
    assert group.stats()["comm"]["bcast_backend"] == "gloo"
    assert group.verify_eval_weight_consistency()["consistent"]
    _train_sync_check(group, [ppo_dataset(seed=1), ppo_dataset(seed=2)])


@pytest.mark.ray
def test_object_store_from_a_local_train_worker_to_remote_eval_workers(async_echo_group):
    group = async_echo_group
    group.construct_network(DISCRETE_META)
    assert group.stats()["weight_sync"]["effective"] == "object_store"
    version = group.weight_version
    group.train_workers[0].worker.train()  # changes the weights in this process
    assert not group.verify_eval_weight_consistency(raise_on_mismatch=False)["consistent"]
    assert group.sync_weights() == version + 1
    assert group.verify_eval_weight_consistency()["consistent"]
