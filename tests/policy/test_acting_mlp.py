"""`mlp_act`: an MLP's tanh layers evaluated through sigmoid for acting, refolded when the weights change."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from rlightning.policy.algorithms import acting_mlp
from rlightning.policy.algorithms.acting_mlp import MIN_ROWS, call_module, fold_pays, fold_tanh, mlp_act, set_fold
from rlightning.policy.algorithms.networks import mlp, mlp_forward
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.utils.config import OptimConfig, PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_ret

# float32 rounding of the folded weights and of sigmoid against tanh, for outputs of a few units
TOLERANCE = 2e-5


@pytest.fixture(autouse=True)
def folding():
    """These tests check the folded copy: fold whatever this CPU's timings say (`fold_pays`)."""
    before = set_fold(True)
    yield
    set_fold(before)


def test_the_fold_is_used_where_tanh_costs_twice_sigmoid_or_more(monkeypatch):
    costs = {}
    monkeypatch.setattr(acting_mlp, "_best_call_seconds", lambda fn, y: costs[fn])
    for tanh, sigmoid, fold in ((5.0, 1.0, True), (2.0, 1.0, True), (1.9, 1.0, False), (0.75, 1.0, False)):
        costs.update({torch.tanh: tanh, torch.sigmoid: sigmoid})
        set_fold(None)
        assert fold_pays() is fold
        costs.update({torch.tanh: 1.0 / tanh})  # decided once per process: not measured again
        assert fold_pays() is fold
    set_fold(None)
    monkeypatch.undo()
    assert fold_pays() in (True, False)  # this CPU's own timings decide


def test_where_the_fold_does_not_pay_acting_is_exactly_the_tanh_network():
    net, x = _net(), torch.randn(256, 4)
    set_fold(False)
    with torch.no_grad():
        assert torch.equal(mlp_act(net, x), mlp_forward(net, x))
    set_fold(True)
    with torch.no_grad():
        assert not torch.equal(mlp_act(net, x), mlp_forward(net, x))


def _net(out: int = 2, gain: float = 0.01, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    net = mlp(4, [64, 64], out, "tanh", out_gain=gain)
    with torch.no_grad():  # biases and larger weights than the init's, so that every tanh sees both ends
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return net


def test_folded_mlp_is_the_tanh_mlp_up_to_float_rounding():
    for out, gain in ((2, 0.01), (1, 1.0)):
        net = _net(out, gain)
        x = torch.randn(20000, 4) * 3
        with torch.no_grad():
            want, got = mlp_forward(net, x), mlp_act(net, x)
        assert got.shape == want.shape and got.dtype == want.dtype
        assert float((got - want).abs().max()) < TOLERANCE
        assert not torch.equal(got, want)  # it does go through the folded copy


def test_fold_turns_only_tanh_between_two_linears_into_sigmoid():
    net = nn.Sequential(nn.Linear(3, 5), nn.Tanh(), nn.Linear(5, 5), nn.ReLU(), nn.Linear(5, 4), nn.Tanh())
    kinds = [op[1] if op[0] == "fn" else op[0] for op in fold_tanh(tuple(net))]
    assert kinds == ["linear", torch.sigmoid, "linear", torch.relu, "linear", torch.tanh]
    x = torch.randn(500, 3) * 2
    with torch.no_grad():
        assert float((mlp_act(net, x) - net(x)).abs().max()) < TOLERANCE
    assert fold_tanh(tuple(mlp(4, [8], 2, "relu"))) is None
    assert fold_tanh(tuple(nn.Sequential(nn.Linear(2, 2), nn.Tanh()))) is None  # no Linear after it
    assert fold_tanh(tuple(nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Dropout(), nn.Linear(2, 2)))) is None


def test_networks_with_nothing_to_fold_give_exactly_mlp_forward():
    x = torch.randn(16, 4)
    for net in (mlp(4, [8, 8], 2, "relu"), mlp(4, [8], 2, "elu"), mlp(4, [], 2), nn.Linear(4, 2)):
        with torch.no_grad():
            assert torch.equal(mlp_act(net, x), mlp_forward(net, x))


def test_small_batches_are_the_tanh_network_exactly():
    net = _net()
    with torch.no_grad():
        small, large = torch.randn(MIN_ROWS - 1, 4), torch.randn(MIN_ROWS, 4)
        assert torch.equal(mlp_act(net, small), mlp_forward(net, small))
        assert not torch.equal(mlp_act(net, large), mlp_forward(net, large))


def test_with_gradients_it_is_the_tanh_network_and_trains():
    net = _net()
    x = torch.randn(8, 4)
    out = mlp_act(net, x)
    assert torch.equal(out, mlp_forward(net, x))
    out.sum().backward()
    assert all(p.grad is not None for p in net.parameters())


def test_hooks_run_as_the_module_would():
    net = _net()
    x = torch.randn(MIN_ROWS, 4)
    seen = []
    handle = net[2].register_forward_hook(lambda mod, inp, out: seen.append("layer") or out * 2)
    with torch.no_grad():
        assert torch.equal(mlp_act(net, x), net(x)) and seen == ["layer", "layer"]
    handle.remove()
    with torch.no_grad():
        assert float((mlp_act(net, x) - net(x)).abs().max()) < TOLERANCE and len(seen) == 2  # no hook: folded


def _check_follows(net: nn.Sequential, x: torch.Tensor) -> None:
    with torch.no_grad():
        assert float((mlp_act(net, x) - mlp_forward(net, x)).abs().max()) < TOLERANCE


def test_refolded_after_every_kind_of_weight_change():
    net, x = _net(), torch.randn(64, 4)
    _check_follows(net, x)
    net.load_state_dict(_net(seed=1).state_dict())  # in place: copy_
    _check_follows(net, x)
    opt = torch.optim.Adam(net.parameters(), lr=0.1)  # not fused: that step leaves the version counter alone
    mlp_forward(net, x).pow(2).sum().backward()
    opt.step()
    _check_follows(net, x)
    with torch.no_grad():
        net[2].bias.add_(1.0)  # any in-place write
    _check_follows(net, x)
    net[2].weight = nn.Parameter(torch.randn(64, 64))  # a parameter replaced
    _check_follows(net, x)
    net[4] = nn.Linear(64, 2)  # a layer replaced
    _check_follows(net, x)


def _ppo(role=PolicyRole.EVAL, seed: int = 0) -> PPOPolicy:
    policy = PPOPolicy(PolicyConfig(hidden_sizes=[64, 64], optim=OptimConfig(lr=1e-3)), role_type=role)
    policy.setup(DISCRETE_META, seed=seed)
    return policy


def test_ppo_acting_values_and_log_probs_follow_the_tanh_networks_and_weight_syncs():
    learner, copy = _ppo(PolicyRole.TRAIN), _ppo()
    obs = env_ret("e", num_envs=256, seed=3).observation * 3
    for _ in range(2):
        copy.load_state_dict(learner.get_weights(), weight_version=copy.weight_version + 1)
        out = copy.compute_actions(obs)
        x = learner.encoder(torch.as_tensor(obs))
        with torch.no_grad():
            value = learner.critic(x).squeeze(-1).numpy()
            logp_all = torch.log_softmax(learner.actor(x), -1).numpy()
        np.testing.assert_allclose(out["value"], value, rtol=0, atol=TOLERANCE)
        np.testing.assert_allclose(out["log_prob"], logp_all[np.arange(256), out["action"]], rtol=0, atol=TOLERANCE)
        with torch.no_grad():  # the learner moves on: the copy must not act with the old fold
            for p in learner.get_trainable_parameters():
                p.add_(torch.randn_like(p) * 0.1)


def test_ppo_learner_acts_with_its_tanh_networks():
    learner = _ppo(PolicyRole.TRAIN)
    obs = env_ret("e", num_envs=32, seed=2).observation
    out = learner.compute_actions(obs, deterministic=True)
    with torch.no_grad():
        value = learner.critic(learner.encoder(torch.as_tensor(obs))).squeeze(-1).numpy()
    np.testing.assert_array_equal(out["value"], value)


def test_ppo_seeded_copies_act_identically():
    obs = env_ret("e", num_envs=64, seed=1).observation
    a, b = _ppo(seed=7), _ppo(seed=7)
    for step in range(3):
        torch.manual_seed(step)
        out_a = a.compute_actions(obs)
        torch.manual_seed(step)
        out_b = b.compute_actions(obs)
        for key in out_a:
            np.testing.assert_array_equal(out_a[key], out_b[key])


def test_call_module_is_the_module_call_and_runs_hooks():
    net = _net()
    x = torch.randn(4, 4)
    with torch.no_grad():
        assert torch.equal(call_module(net, x), net(x))
    seen = []
    handle = net.register_forward_hook(lambda mod, inp, out: seen.append("net") or out + 1)
    with torch.no_grad():
        assert torch.equal(call_module(net, x), net(x)) and seen == ["net", "net"]
    handle.remove()
