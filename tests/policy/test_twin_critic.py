"""The batched twin critics (rlightning/policy/algorithms/twin_critic.py): the same values and gradients as two
separate critics, their init, checkpoints round trip, and checkpoints of the separate-critic layout load."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from rlightning.policy.algorithms.networks import mlp
from rlightning.policy.algorithms.sac import SACPolicy
from rlightning.policy.algorithms.td3 import TD3Policy
from rlightning.policy.algorithms.twin_critic import TwinQNetwork, upgrade_twin_critic_checkpoint
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.checkpoint import read_checkpoint
from rlightning.utils.config import PolicyConfig
from tests.support.policy_data import CONTINUOUS_META, offpolicy_dataset

#: Checkpoints written by the separate-critic code (modules qf1, qf2, qf1_target, qf2_target): SAC and TD3 with
#: hidden_sizes [8, 8], ReLU, CONTINUOUS_META, two train() calls on offpolicy_dataset(16).
DATA = Path(__file__).parent / "data"
POLICIES = {"sac": SACPolicy, "td3": TD3Policy}


def make(name: str, **cfg):
    cfg.setdefault("hidden_sizes", [8, 8])
    cfg.setdefault("activation", "relu")
    policy = POLICIES[name](PolicyConfig(type=name, **cfg), role_type=PolicyRole.TRAIN)
    policy.setup(CONTINUOUS_META, seed=0)
    return policy


def separate_critics(twin: TwinQNetwork, activation: str = "relu"):
    """Two plain `mlp` Q networks holding the twin's weights (copies, their own parameters)."""
    nets = []
    for c in range(2):
        hidden = [getattr(twin, f"weight{i}").shape[2] for i in range(twin.num_layers - 1)]
        net = mlp(twin.weight0.shape[1], hidden, 1, activation)
        net.load_state_dict({k[len("net.") :]: v for k, v in twin.critic_state_dict(c).items()})
        nets.append(net)
    return nets


@pytest.mark.parametrize("hidden,activation", [([16, 8], "relu"), ([5], "tanh"), ([], "relu")])
def test_batched_critics_equal_two_separate_critics_forward_and_gradients(hidden, activation):
    torch.manual_seed(0)
    twin = TwinQNetwork(3, 2, hidden, activation)
    nets = separate_critics(twin, activation)
    x, a = torch.randn(7, 3), torch.randn(7, 2, requires_grad=True)
    q = twin(x, a)
    assert q.shape == (2, 7)
    expected = [net(torch.cat([x, a], -1)).squeeze(-1) for net in nets]
    torch.testing.assert_close(q, torch.stack(expected))
    # gradients of a loss over both critics: the weights' (per critic) and the action's
    y = torch.randn(7)
    (F.mse_loss(q[0], y) + 3 * F.mse_loss(q[1], y)).backward()
    grad_a = a.grad.clone()
    a.grad = None
    (F.mse_loss(expected[0], y) + 3 * F.mse_loss(expected[1], y)).backward()
    torch.testing.assert_close(grad_a, a.grad)
    linears = [[m for m in net if isinstance(m, nn.Linear)] for net in nets]
    for i in range(twin.num_layers):
        for c in range(2):
            torch.testing.assert_close(getattr(twin, f"weight{i}").grad[c], linears[c][i].weight.grad.t())
            torch.testing.assert_close(getattr(twin, f"bias{i}").grad[c, 0], linears[c][i].bias.grad)


def test_detached_weights_pass_gradients_to_the_inputs_only_and_one_critic_is_the_first():
    torch.manual_seed(1)
    twin = TwinQNetwork(3, 2, [8, 8], "relu")
    x, a = torch.randn(5, 3), torch.randn(5, 2, requires_grad=True)
    full = twin(x, a)
    first = twin(x, a, detach_params=True, critics=slice(0, 1))
    assert first.shape == (1, 5)
    torch.testing.assert_close(first[0], full[0])
    first.sum().backward()
    assert all(p.grad is None for p in twin.parameters())
    expected = torch.autograd.grad(full[0].sum(), a)[0]
    torch.testing.assert_close(a.grad, expected)


def test_each_critic_is_initialised_as_a_separate_orthogonal_mlp():
    torch.manual_seed(2)
    twin = TwinQNetwork(4, 2, [64, 32], "relu")
    gains = [math.sqrt(2), math.sqrt(2), 1.0]
    for i, gain in enumerate(gains):
        w, b = getattr(twin, f"weight{i}"), getattr(twin, f"bias{i}")
        assert torch.count_nonzero(b) == 0
        for c in range(2):
            m = w[c].detach()  # [in, out]: orthogonal rows or columns, scaled by the gain
            small = m.t() @ m if m.shape[1] <= m.shape[0] else m @ m.t()
            torch.testing.assert_close(small, gain**2 * torch.eye(small.shape[0]), atol=1e-4, rtol=1e-4)
        assert not torch.equal(w[0], w[1])  # two independent draws


def test_unknown_activation_is_named():
    with pytest.raises(ValueError, match="unknown activation 'swish'"):
        TwinQNetwork(3, 2, [4], "swish")


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_checkpoint_round_trip_then_the_same_updates(name, tmp_path):
    a = make(name)
    a.update_dataset(offpolicy_dataset(16))
    for _ in range(3):
        a.train()
    a.save_checkpoint(tmp_path / "ckpt.pt")
    b = make(name)
    b.load_checkpoint(tmp_path / "ckpt.pt")
    for mname, module in a.modules.items():
        for key, value in module.state_dict().items():
            torch.testing.assert_close(b.modules[mname].state_dict()[key], value, msg=f"{mname}.{key}")
    for policy in (a, b):  # the optimizer states came along: the next updates agree
        torch.manual_seed(9)
        policy.update_dataset(offpolicy_dataset(16, seed=1))
        policy.train()
        policy.train()
    for key, value in a.modules["qf"].state_dict().items():
        torch.testing.assert_close(b.modules["qf"].state_dict()[key], value, msg=key)


def _old_q(saved, x):
    """Q of a separate-critic checkpoint's module (``net.<k>.weight|bias``, ReLU between layers)."""
    layers = sorted({int(k.split(".")[1]) for k in saved})
    for j, k in enumerate(layers):
        x = F.linear(x, saved[f"net.{k}.weight"], saved[f"net.{k}.bias"])
        if j < len(layers) - 1:
            x = torch.relu(x)
    return x.squeeze(-1)


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_checkpoint_with_separate_critics_loads_into_the_batched_ones(name):
    path = DATA / f"{name}_separate_critics.pt"
    old = read_checkpoint(path)
    assert {"qf1", "qf2", "qf1_target", "qf2_target"} <= set(old["modules"]) and "qf" not in old["modules"]
    policy = make(name)
    policy.load_checkpoint(path)
    x, a = torch.randn(6, 3), torch.rand(6, 2) * 4 - 2
    xa = torch.cat([x, a], -1)
    for new, (c1, c2) in (("qf", ("qf1", "qf2")), ("qf_target", ("qf1_target", "qf2_target"))):
        q = policy.modules[new](x, a).detach()
        torch.testing.assert_close(q[0], _old_q(old["modules"][c1], xa))
        torch.testing.assert_close(q[1], _old_q(old["modules"][c2], xa))
    # the critic optimizer's moments were stacked with the weights: parameter 0 is weight0 [2, in, out]
    moments = policy.optimizers["critic"].state_dict()["state"][0]["exp_avg"]
    old_moments = old["optimizers"]["critic"]["state"]
    torch.testing.assert_close(moments[0], old_moments[0]["exp_avg"].t())
    torch.testing.assert_close(moments[1], old_moments[6]["exp_avg"].t())
    assert policy.update_count == old["counters"]["update_count"]
    policy.update_dataset(offpolicy_dataset(16))
    assert {"q_loss", "q_value"} <= set(policy.train())  # the optimizer state fits the parameters


def test_separate_critic_checkpoint_missing_a_critic_says_it_is_older():
    state = read_checkpoint(DATA / "sac_separate_critics.pt")
    del state["modules"]["qf2_target"]
    with pytest.raises(ValueError, match=r"older rlightning .*lacks \['qf2_target'\]"):
        make("sac").load_checkpoint_state(state)
    current = make("sac").checkpoint_state()
    assert upgrade_twin_critic_checkpoint(current, "sac") is current  # the batched layout passes unchanged
