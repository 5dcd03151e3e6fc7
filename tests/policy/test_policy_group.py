"""PolicyGroup with local workers: rollout, learning, sync, consistency, checkpoints, stats, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.policy_group import PolicyGroup
from rlightning.types import BatchedData
from rlightning.utils.config import PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_batch, ppo_dataset
from tests.support.policy_workers import EchoPolicy


def ppo_group(n_eval: int = 1, **cfg) -> PolicyGroup:
    config = PolicyConfig(hidden_sizes=[16], **cfg)
    train = [PPOPolicy(config, role_type=PolicyRole.TRAIN)]
    evals = [PPOPolicy(config, role_type=PolicyRole.EVAL, worker_index=i) for i in range(n_eval)]
    group = PolicyGroup(train, evals, config)
    group.init_placement_info()
    group.init_weight_buffer()
    group.construct_network(DISCRETE_META, seed=0)
    return group


def echo_group(n_eval: int, mode: str = "sync") -> PolicyGroup:
    config = PolicyConfig(rollout_mode=mode)
    train = [EchoPolicy(config, role_type=PolicyRole.TRAIN, worker_index=0)]
    evals = [EchoPolicy(config, role_type=PolicyRole.EVAL, worker_index=10 + i) for i in range(n_eval)]
    group = PolicyGroup(train, evals, config)
    group.construct_network(DISCRETE_META)
    return group


def test_construct_network_syncs_eval_to_train_rank0():
    group = ppo_group(n_eval=2)
    report = group.verify_eval_weight_consistency()
    assert report["consistent"] and len(set(report["eval_checksums"])) == 1
    assert group.stats()["weight_sync"]["effective"] == "local_copy"


def test_rollout_batch_keeps_ids_and_order():
    group = ppo_group()
    batch = env_batch(4)
    out = group.rollout_batch(batch)
    assert isinstance(out, BatchedData)
    assert out.ids() == batch.ids()
    assert [r.env_id for r in out.values()] == list(batch.ids())
    assert all(r.action.shape == (3,) for r in out.values())


def test_sync_routing_splits_evenly_and_runs_one_forward_pass_per_worker():
    group = echo_group(n_eval=2)
    out = group.rollout_batch(env_batch(5))
    assert [int(r.action[0]) for r in out.values()] == [10, 10, 10, 11, 11]
    assert [w.worker.forward_calls for w in group.eval_workers] == [1, 1]


def test_zero_eval_workers_train_worker_answers():
    config = PolicyConfig()
    group = PolicyGroup([EchoPolicy(config, worker_index=0)], [], config)
    group.construct_network(DISCRETE_META)
    out = group.rollout_batch(env_batch(2))
    assert [int(r.action[0]) for r in out.values()] == [0, 0]
    assert group.sync_weights() == 1
    assert out.values()[0].weight_version == 0
    assert group.rollout_batch(env_batch(1)).values()[0].weight_version == 1


def test_train_then_sync_advances_version_and_equalises_weights():
    group = ppo_group(n_eval=2)
    group.update_dataset([ppo_dataset()])
    metrics = group.train()
    assert "policy_loss" in metrics
    assert not group.verify_eval_weight_consistency(raise_on_mismatch=False)["consistent"]
    assert group.sync_weights() == 1
    report = group.verify_eval_weight_consistency()
    assert report["versions"] == {"train[0]": 1, "eval[0]": 1, "eval[1]": 1}
    assert all(r.weight_version == 1 for r in group.rollout_batch(env_batch(2)).values())


def test_verify_raises_naming_the_worker_that_differs():
    group = ppo_group(n_eval=2)
    evaluator = group.eval_workers[1].worker
    evaluator.load_state_dict({k: v + 1.0 for k, v in evaluator.get_weights().items()})
    with pytest.raises(RuntimeError, match=r"policy weights differ from train\[0\] on \['eval\[1\]'\]"):
        group.verify_eval_weight_consistency()


def test_update_dataset_checks_one_entry_per_train_worker():
    group = ppo_group()
    with pytest.raises(ValueError, match="update_dataset got 2 entries for 1 train workers"):
        group.update_dataset([ppo_dataset(), ppo_dataset()])
    with pytest.raises(TypeError, match="one entry per train worker, got TensorDict"):
        group.update_dataset(ppo_dataset())


def test_rollout_batch_needs_batched_data():
    with pytest.raises(TypeError, match="needs a BatchedData of EnvRet, got list"):
        ppo_group().rollout_batch([1])


def test_sync_before_construct_network_is_a_clear_error():
    config = PolicyConfig()
    group = PolicyGroup([PPOPolicy(config)], [PPOPolicy(config, role_type=PolicyRole.EVAL)], config)
    with pytest.raises(RuntimeError, match="sync_weights called before construct_network"):
        group.sync_weights()


def test_group_checkpoint_roundtrip_resyncs_eval(tmp_path):
    group = ppo_group(n_eval=1)
    group.update_dataset([ppo_dataset()])
    group.train()
    group.sync_weights()
    path = group.save_checkpoint(tmp_path / "run" / "policy.pt")
    saved = group.verify_eval_weight_consistency()["train_checksums"][0]
    other = ppo_group(n_eval=1)
    assert other.load_checkpoint(path) == 1
    report = other.verify_eval_weight_consistency()
    assert report["train_checksums"][0] == saved and report["consistent"]
    assert other.weight_version == 1
    with pytest.raises(FileNotFoundError, match="does not exist"):
        other.load_checkpoint(tmp_path / "nope.pt")


def test_set_deterministic_reaches_the_rollout_workers():
    group = echo_group(n_eval=2)
    group.set_deterministic(True)
    assert all(bool(r.deterministic.all()) for r in group.rollout_batch(env_batch(2)).values())


def test_stats_is_a_plain_json_snapshot():
    group = ppo_group(n_eval=2)
    group.rollout_batch(env_batch(3))
    group.update_dataset([ppo_dataset()])
    group.train()
    group.sync_weights()
    stats = group.stats()
    json.dumps(stats)
    assert stats["weight_version"] == 1 and stats["sync_count"] == 1 and stats["train_calls"] == 1
    assert stats["rollout_calls"] == 1 and stats["rollout_items"] == 3
    assert [w["items"] for w in stats["rollout_workers"]] == [2, 1]
    assert stats["last_sync_s"] >= 0 and "policy_loss" in stats["last_train_metrics"]


def test_constructor_errors():
    config = PolicyConfig()
    with pytest.raises(ValueError, match="at least one train or eval worker"):
        PolicyGroup([], [], config)
    with pytest.raises(ValueError, match="train_worker_num=2 with train workers in this process"):
        PolicyGroup([PPOPolicy(config), PPOPolicy(config, worker_index=1)], [], config)
    with pytest.raises(TypeError, match="needs a PolicyConfig"):
        PolicyGroup([PPOPolicy(config)], [], {"type": "ppo"})


def test_init_comm_group_without_remote_workers_creates_nothing():
    group = ppo_group()
    assert group.init_comm_group(backend="gloo") == {"world_size": 0}
    with pytest.raises(ValueError, match="backend='mpi' is not a torch.distributed backend here"):
        group.init_comm_group(backend="mpi")


def test_eval_only_group_acts_and_refuses_to_train(tmp_path):
    trained = ppo_group()
    path = trained.save_checkpoint(tmp_path / "p.pt")
    config = PolicyConfig(hidden_sizes=[16], checkpoint=path)
    group = PolicyGroup([], [PPOPolicy(config, role_type=PolicyRole.EVAL)], config)
    group.construct_network(DISCRETE_META)
    assert group.eval_workers[0].worker.weights_checksum() == trained.train_workers[0].worker.weights_checksum()
    assert np.asarray(group.rollout_batch(env_batch(1)).values()[0].action).shape == (3,)
    with pytest.raises(RuntimeError, match="train needs train workers"):
        group.train()
