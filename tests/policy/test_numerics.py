"""The learner's arithmetic scope: ``optim.matmul_precision`` and ``optim.flush_denormals`` around each update."""

from __future__ import annotations

import pytest
import torch
from pydantic import ValidationError

from rlightning.policy import numerics
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.policy_group import PolicyGroup
from rlightning.utils.config import OptimConfig, PolicyConfig
from tests.support.policy_data import DISCRETE_META


class _Recording(PPOPolicy):
    """PPO whose ``train()`` records the arithmetic it ran in, after one real gradient step."""

    def train(self):
        weight = torch.nn.Parameter(torch.ones(4))
        opt = torch.optim.Adam([weight], lr=1e-3)
        self.apply_gradients((weight * 2.0).sum(), opt, [weight], return_norm=False)
        # after apply_gradients returned: the outer scope (learn) must still be in force
        self.seen = {
            "precision": torch.get_float32_matmul_precision(),
            "flushing": float(torch.tensor([1e-38]) / 100) == 0.0,
        }
        if getattr(self, "fail", False):
            raise RuntimeError("update failed")
        return {"loss": 1.0}


def _policy(**optim) -> _Recording:
    policy = _Recording(PolicyConfig(hidden_sizes=[8], optim=optim), role_type=PolicyRole.TRAIN)
    policy.setup(DISCRETE_META, seed=0)
    return policy


@pytest.fixture
def restore_precision():
    before = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(before)
    torch.set_flush_denormal(False)


@pytest.mark.parametrize("bf16_units, expected", [(True, "medium"), (False, "highest")])
def test_learn_trains_at_the_requested_precision_and_restores_it(monkeypatch, restore_precision, bf16_units, expected):
    monkeypatch.setattr(numerics, "cpu_has_bf16_units", lambda: bf16_units)
    torch.set_float32_matmul_precision("highest")
    policy = _policy(matmul_precision="medium", flush_denormals=True)
    assert policy.learn() == {"loss": 1.0}
    assert policy.seen == {"precision": expected, "flushing": True}
    assert torch.get_float32_matmul_precision() == "highest"
    assert float(torch.tensor([1e-38]) / 100) > 0  # subnormals are computed again outside the update


def test_no_precision_leaves_the_process_setting(restore_precision):
    torch.set_float32_matmul_precision("high")
    policy = _policy(flush_denormals=False)
    policy.learn()
    assert policy.seen == {"precision": "high", "flushing": False}
    assert torch.get_float32_matmul_precision() == "high"


def test_a_failing_update_restores_the_arithmetic(monkeypatch, restore_precision):
    monkeypatch.setattr(numerics, "cpu_has_bf16_units", lambda: True)
    torch.set_float32_matmul_precision("highest")
    policy = _policy(matmul_precision="medium")
    policy.fail = True
    with pytest.raises(RuntimeError, match="update failed"):
        policy.learn()
    assert policy.seen["precision"] == "medium"
    assert torch.get_float32_matmul_precision() == "highest"
    assert float(torch.tensor([1e-38]) / 100) > 0


def test_learn_with_minibatches_runs_in_the_scope(monkeypatch, restore_precision):
    monkeypatch.setattr(numerics, "cpu_has_bf16_units", lambda: True)
    policy = _policy(matmul_precision="medium")
    seen = []
    monkeypatch.setattr(policy, "train_minibatches", lambda k: seen.append((k, torch.get_float32_matmul_precision())))
    policy.learn(3)
    assert seen == [(3, "medium")]


def test_the_policy_group_trains_through_learn(monkeypatch, restore_precision):
    monkeypatch.setattr(numerics, "cpu_has_bf16_units", lambda: True)
    torch.set_float32_matmul_precision("highest")
    policy = _policy(matmul_precision="medium")
    group = PolicyGroup([policy], [], policy.config)
    assert group.train() == {"loss": 1.0}
    assert policy.seen["precision"] == "medium"
    assert torch.get_float32_matmul_precision() == "highest"


def test_cuda_keeps_the_requested_precision(monkeypatch):
    monkeypatch.setattr(numerics, "cpu_has_bf16_units", lambda: False)
    assert numerics.effective_matmul_precision("high", "cuda") == "high"
    assert numerics.effective_matmul_precision("medium", "cpu") == "highest"
    assert numerics.effective_matmul_precision(None, "cpu") is None


def test_an_unknown_precision_is_rejected_with_the_valid_ones():
    with pytest.raises(ValidationError) as err:
        OptimConfig(matmul_precision="low")
    text = str(err.value)
    assert "matmul_precision" in text and "'highest'" in text and "'medium'" in text


@pytest.mark.skipif(not numerics.cpu_has_bf16_units(), reason="this CPU has no bfloat16 units (AMX or AVX512-BF16)")
def test_medium_multiplies_in_bfloat16_on_a_cpu_with_bf16_units(restore_precision):
    # The scope's setting reaches the kernels: products lose float32 accuracy under "medium" (bfloat16-rounded
    # inputs), and are exact float32 products again after the scope.
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 256, generator=gen), torch.randn(256, 32, generator=gen)
    exact = a.double() @ b.double()
    torch.set_float32_matmul_precision("highest")
    with numerics.update_numerics(OptimConfig(matmul_precision="medium"), "cpu"):
        inside = a @ b
    after = a @ b
    assert (inside.double() - exact).abs().max() > 1e-2
    assert (after.double() - exact).abs().max() < 1e-3
