"""Acting through numpy: an MLP's forward, log-softmax and categorical draw, and PPO's eval copies using them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from rlightning.policy.algorithms import numpy_acting
from rlightning.policy.algorithms.networks import ObsEncoder, mlp, mlp_forward
from rlightning.policy.algorithms.numpy_acting import categorical_draw_np, mlp_numpy, rows_of
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import OptimConfig, PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_ret

# float32 products summed in another order, for outputs of a few units
TOLERANCE = 2e-5


def _net(activation: str = "tanh", out: int = 2, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    net = mlp(4, [64, 64], out, activation)
    with torch.no_grad():  # biases and larger weights than the init's
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return net


def _close(net: nn.Module, x: np.ndarray) -> None:
    got = mlp_numpy(net, x)
    with torch.no_grad():
        want = mlp_forward(net, torch.as_tensor(x)).numpy()
    assert got is not None and got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=TOLERANCE)  # ReLU outputs reach about 30


def test_numpy_mlp_is_the_torch_mlp_up_to_float_rounding():
    x = (np.random.default_rng(0).standard_normal((500, 4)) * 3).astype(np.float32)
    for activation, out in (("tanh", 2), ("tanh", 1), ("relu", 3)):
        _close(_net(activation, out), x)
    before = x.copy()
    mlp_numpy(_net(), x)
    np.testing.assert_array_equal(x, before)  # the input is left alone


def test_networks_without_a_numpy_form_give_none():
    x = np.zeros((8, 4), np.float32)
    assert mlp_numpy(mlp(4, [8], 2, "elu"), x) is None  # another activation
    assert mlp_numpy(nn.Linear(4, 2), x) is None  # not a Sequential
    assert mlp_numpy(_net().double(), x) is None  # float64 weights
    assert mlp_numpy(_net(), x.astype(np.float64)) is None  # float64 input
    net = _net()
    handle = net[2].register_forward_hook(lambda mod, inp, out: out)
    assert mlp_numpy(net, x) is None  # a hooked layer: the module's forward must run
    handle.remove()
    assert mlp_numpy(net, x) is not None


def test_the_numpy_copy_follows_every_kind_of_weight_change():
    net = _net()
    x = np.random.default_rng(1).standard_normal((64, 4)).astype(np.float32)
    _close(net, x)
    net.load_state_dict(_net(seed=1).state_dict())  # in place: copy_
    _close(net, x)
    opt = torch.optim.Adam(net.parameters(), lr=0.1)  # not fused: that step moves the version counters
    mlp_forward(net, torch.as_tensor(x)).pow(2).sum().backward()
    opt.step()
    _close(net, x)
    with torch.no_grad():
        net[2].bias.add_(1.0)
    _close(net, x)
    net[2].weight = nn.Parameter(torch.randn(64, 64))  # a parameter replaced
    _close(net, x)
    net[4] = nn.Linear(64, 2)  # a layer replaced
    _close(net, x)


def test_the_draw_follows_the_distribution():
    logp = np.array([[0.0, 1.0, -1.0, -np.inf]] * 4, np.float32) + 3.0  # logits: the draw needs no normalising
    want = torch.log_softmax(torch.as_tensor(logp), -1).numpy()
    rng = np.random.default_rng(0)
    draws = np.concatenate([categorical_draw_np(logp, rng) for _ in range(50_000)])
    assert draws.dtype == np.int64
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, np.exp(want[0]), atol=0.005)  # 200k draws: sd of a frequency below 0.0011
    assert freq[3] == 0.0  # probability 0: never drawn
    rows = np.stack([categorical_draw_np(logp, rng) for _ in range(2000)])
    assert len({tuple(r) for r in rows}) > 40  # the rows draw apart (3^4 combinations)
    np.testing.assert_array_equal(rows_of(logp, np.array([0, 1, 2, 0])), logp[[0, 1, 2, 3], [0, 1, 2, 0]])


def test_obs_encoder_numpy_features_are_its_forward():
    box = gym.spaces.Box(-1.0, 1.0, (2, 3), np.float32)
    obs = np.random.default_rng(2).standard_normal((10, 2, 3)).astype(np.float32) * 4
    for normalize in (False, True):
        enc = ObsEncoder(box, normalize=normalize, clip=2.0)
        if normalize:
            enc.update(enc.batch_sums(torch.as_tensor(obs * 0.5 + 1)))
        with torch.no_grad():
            want = enc(torch.as_tensor(obs)).numpy()
        got = enc.numpy_features(obs)
        assert got.dtype == np.float32 and got.shape == (10, 6)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
    assert ObsEncoder(gym.spaces.Discrete(3)).numpy_features(np.array([0, 1, 2])) is None  # one-hot: torch
    assert ObsEncoder(box).numpy_features(torch.as_tensor(obs)) is None  # not a numpy array


def _ppo(role=PolicyRole.EVAL, seed: int = 0, **cfg) -> PPOPolicy:
    policy = PPOPolicy(PolicyConfig(hidden_sizes=[64, 64], optim=OptimConfig(lr=1e-3), **cfg), role_type=role)
    policy.setup(DISCRETE_META, seed=seed)
    return policy


@pytest.mark.parametrize("norm_obs", [False, True])
def test_ppo_eval_copies_act_in_numpy_as_the_learner_would_in_torch(monkeypatch, norm_obs):
    calls = []
    real = numpy_acting.mlp_numpy
    monkeypatch.setattr(numpy_acting, "mlp_numpy", lambda net, x: calls.append(net) or real(net, x))
    learner, copy = _ppo(PolicyRole.TRAIN, norm_obs=norm_obs), _ppo(norm_obs=norm_obs)
    obs = env_ret("e", num_envs=256, seed=3).observation * 3
    if norm_obs:
        learner.encoder.update(learner.encoder.batch_sums(torch.as_tensor(obs)))
    copy.load_state_dict(learner.get_weights(), weight_version=1)
    for deterministic in (True, False):
        out = copy.compute_actions(obs, deterministic=deterministic)
        assert set(out) == {"action", "log_prob", "value"}
        assert out["action"].dtype == np.int64 and out["log_prob"].dtype == out["value"].dtype == np.float32
        with torch.no_grad():
            x = learner.encoder(torch.as_tensor(obs))
            value = learner.critic(x).squeeze(-1).numpy()
            logp_all = torch.log_softmax(learner.actor(x), -1).numpy()
        np.testing.assert_allclose(out["value"], value, rtol=0, atol=TOLERANCE)
        np.testing.assert_allclose(out["log_prob"], logp_all[np.arange(256), out["action"]], rtol=0, atol=TOLERANCE)
        if deterministic:
            np.testing.assert_array_equal(out["action"], logp_all.argmax(-1))
    assert calls and all(net in (copy.actor, copy.critic) for net in calls)  # the copy acted in numpy
    calls.clear()
    learner.compute_actions(obs)
    assert not calls  # the learner acts with the torch networks it trains


def test_the_draw_repeats_itself_for_a_seed():
    logp = np.random.default_rng(3).standard_normal((16, 5)).astype(np.float32)
    a = [categorical_draw_np(logp, np.random.default_rng(7)) for _ in range(2)]
    np.testing.assert_array_equal(a[0], a[1])
    assert not np.array_equal(categorical_draw_np(logp, np.random.default_rng(8)), a[0])


def test_ppo_copies_draw_from_their_seeded_generator():
    obs = env_ret("e", num_envs=64, seed=3).observation
    copies = [_ppo(seed=s) for s in (5, 5, 6)]
    runs = [[c.compute_actions(obs)["action"] for _ in range(3)] for c in copies]
    for a, b in zip(runs[0], runs[1]):
        np.testing.assert_array_equal(a, b)  # one seed, one stream of draws
    assert not np.array_equal(runs[0][0], runs[0][1])  # the stream moves on between calls
    assert not all(np.array_equal(a, b) for a, b in zip(runs[0], runs[2]))  # another seed, other draws


def test_ppo_copies_act_in_torch_where_numpy_has_no_form(monkeypatch):
    calls = []
    monkeypatch.setattr(numpy_acting, "mlp_numpy", lambda net, x: calls.append(net))
    policy = PPOPolicy(PolicyConfig(hidden_sizes=[16]), role_type=PolicyRole.EVAL)
    policy.setup(EnvMeta("Toy-1", gym.spaces.Discrete(3), gym.spaces.Discrete(5), 4), seed=0)
    out = policy.compute_actions(np.array([0, 1, 2, 4]))  # one-hot observations: the torch encoder
    assert out["action"].shape == (4,) and not calls
    policy = _ppo()
    assert policy.compute_actions(env_ret("e", num_envs=4).observation)["action"].shape == (4,)
    assert calls  # asked, got None back (the patched stub): torch acted


@pytest.mark.parametrize("k", [1, 2, 4, 5, 18])
def test_the_log_normalizer_is_logsumexp_without_overflow(k):
    logits = (np.random.default_rng(k).standard_normal((50, k)) * 30).astype(np.float32)
    logits[0] = 1000.0  # exp would overflow float32
    logits[1, 0] = -np.inf  # an action of probability 0
    got = numpy_acting.log_normalizer(logits)
    want = torch.logsumexp(torch.as_tensor(logits, dtype=torch.float64), dim=-1).numpy()
    assert got.dtype == np.float32 and got.shape == (50,)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
