"""Process groups and data-parallel training (rlightning/policy/comm.py, worker_host.py)."""

from __future__ import annotations

import pytest
import torch

from rlightning.policy.comm import FlatWeights, choose_backend, tensors_checksum
from tests.support.policy_data import DISCRETE_META, ppo_dataset

GPU_A = {"node_id": "n1", "gpu_ids": [0], "cuda_available": True}
GPU_B = {"node_id": "n1", "gpu_ids": [1], "cuda_available": True}
CPU = {"node_id": "n1", "gpu_ids": [], "cuda_available": False}


@pytest.mark.parametrize(
    ("requested", "members", "backend", "reason"),
    [
        ("nccl", [GPU_A, GPU_B], "nccl", ""),
        ("auto", [GPU_A, GPU_B], "nccl", ""),
        ("gloo", [GPU_A, GPU_B], "gloo", ""),
        ("nccl", [GPU_A, CPU], "gloo", "not every member has a GPU"),
        ("auto", [CPU, CPU], "gloo", "not every member has a GPU"),
        ("nccl", [GPU_A, dict(GPU_A)], "gloo", "share GPU 0 on one node"),
    ],
)
def test_choose_backend(requested, members, backend, reason):
    got, why = choose_backend(requested, members, "test")
    assert got == backend
    assert reason in why


def test_choose_backend_rejects_unknown_names():
    with pytest.raises(ValueError, match="backend='mpi' is not a torch.distributed backend here"):
        choose_backend("mpi", [CPU], "test")


def test_flat_weights_pack_unpack_roundtrip_per_dtype():
    src = {"a.w": torch.randn(3, 4), "a.b": torch.randn(4), "n.count": torch.tensor(5.0, dtype=torch.float64)}
    dst = {k: torch.zeros_like(v) for k, v in src.items()}
    flat = FlatWeights(src, torch.device("cpu"))
    assert set(flat.buffers) == {torch.float32, torch.float64}
    assert flat.nbytes == 16 * 4 + 8
    assert flat.signature() == FlatWeights(dst, torch.device("cpu")).signature()
    assert flat.signature() != FlatWeights({"a.w": torch.zeros(4, 3)}, torch.device("cpu")).signature()
    flat.pack(src)
    flat.unpack(dst)
    assert tensors_checksum(dst) == tensors_checksum(src)


@pytest.mark.ray
def test_ddp_two_train_workers_on_gloo_end_with_identical_weights(ddp_collective_group):
    group = ddp_collective_group
    group.construct_network(DISCRETE_META, seed=0)
    comm = group.stats()["comm"]
    assert comm["ddp_size"] == 2 and comm["ddp_backend"] == "gloo"
    assert "not every member has a GPU" in comm["ddp_fallback_reason"]
    infos = [w.call("comm_info") for w in group.train_workers]
    assert [i["rank"] for i in infos] == [0, 1] and all(i["data_parallel"] for i in infos)
    start = group.verify_eval_weight_consistency()
    assert len(set(start["train_checksums"])) == 1, "rank 1 starts from rank 0's weights"
    group.update_dataset([ppo_dataset(seed=10), ppo_dataset(seed=20)])  # different data per rank
    metrics = group.train()
    assert "policy_loss" in metrics
    after = group.verify_eval_weight_consistency(raise_on_mismatch=False)
    assert after["train_checksums"][0] == after["train_checksums"][1]
    assert after["train_checksums"][0] != start["train_checksums"][0]


@pytest.mark.ray
def test_a_train_that_steps_its_optimizer_by_hand_still_averages_gradients(ddp_plain_step_group):
    """Without `apply_gradients`, rank 0 and rank 1 (different data) would end with different weights."""
    group = ddp_plain_step_group
    group.construct_network(DISCRETE_META, seed=0)
    start = [w.call("weights_checksum") for w in group.train_workers]
    assert start[0] == start[1]
    group.update_dataset([ppo_dataset(seed=10), ppo_dataset(seed=20)])
    group.train()
    after = [w.call("weights_checksum") for w in group.train_workers]
    assert after[0] == after[1] and after[0] != start[0]
