"""Network pieces (rlightning/policy/algorithms/networks.py)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlightning.policy.algorithms.networks import ObsEncoder, RunningMeanStd, action_kind, mlp, mlp_forward, obs_dim


def test_mlp_shapes_and_zero_biases():
    net = mlp(4, [8, 8], 3, "relu", out_gain=0.01)
    assert net(torch.zeros(5, 4)).shape == (5, 3)
    assert all(float(m.bias.detach().abs().sum()) == 0 for m in net if isinstance(m, torch.nn.Linear))
    assert mlp(4, [], 2)(torch.zeros(1, 4)).shape == (1, 2)


def test_obs_dim_of_box_and_discrete_and_rejects_others():
    assert obs_dim(gym.spaces.Box(0, 1, (2, 3)), "p") == 6
    assert obs_dim(gym.spaces.Discrete(5), "p") == 5
    assert obs_dim(gym.spaces.MultiDiscrete([2, 3]), "p") == 5 and obs_dim(gym.spaces.MultiBinary((2, 2)), "p") == 4
    with pytest.raises(ValueError, match="policy 'p' encodes Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple"):
        obs_dim(gym.spaces.Tuple((gym.spaces.Discrete(2),)), "p")  # build_encoder gives Tuples a DictEncoder


def test_action_kind():
    assert action_kind(gym.spaces.Discrete(2), "p", ("discrete",)) == "discrete"
    assert action_kind(gym.spaces.Box(-1, 1, (2,)), "p", ("discrete", "continuous")) == "continuous"
    assert action_kind(gym.spaces.MultiBinary(2), "p", ("multi_binary",)) == "multi_binary"
    with pytest.raises(ValueError, match=r"policy 'p' needs a discrete \(Discrete\) action space, got continuous"):
        action_kind(gym.spaces.Box(-1, 1, (2,)), "p", ("discrete",))
    with pytest.raises(ValueError, match=r"needs a discrete \(Discrete\) action space, got multi_discrete"):
        action_kind(gym.spaces.MultiDiscrete([2]), "p", ("discrete",))


def test_running_mean_std_matches_numpy_over_batches():
    rng = np.random.default_rng(0)
    data = rng.normal(3.0, 2.0, (1000, 2))
    rms = RunningMeanStd((2,), epsilon=0.0)
    rms.count.fill_(0.0)
    for chunk in np.array_split(data, 7):
        x = torch.as_tensor(chunk)
        rms.update_from_sums(float(len(chunk)), x.sum(0), (x * x).sum(0))
    np.testing.assert_allclose(rms.mean.numpy(), data.mean(0), rtol=1e-9)
    np.testing.assert_allclose(rms.var.numpy(), data.var(0), rtol=1e-9)
    assert float(rms.count) == 1000


def test_obs_encoder_one_hot_and_normalisation():
    enc = ObsEncoder(gym.spaces.Discrete(3, start=1))
    np.testing.assert_array_equal(enc(torch.tensor([[1], [3]])).numpy(), [[1, 0, 0], [0, 0, 1]])
    norm = ObsEncoder(gym.spaces.Box(-10, 10, (2,)), normalize=True, clip=5.0)
    obs = torch.tensor([[0.0, 100.0], [2.0, -100.0]])
    norm.update(norm.batch_sums(obs))
    out = norm(obs)
    assert out.dtype == torch.float32
    assert float(out.abs().max()) <= 5.0
    np.testing.assert_allclose(out[:, 0].numpy(), [-1.0, 1.0], atol=1e-2)
    assert "rms.mean" in norm.state_dict()


@pytest.mark.parametrize("activation", ["tanh", "relu", "elu"])
def test_mlp_forward_computes_exactly_what_the_module_does(activation):
    torch.manual_seed(0)
    net = mlp(4, [16, 16], 3, activation)
    x = torch.randn(8, 4)
    with torch.no_grad():
        assert torch.equal(mlp_forward(net, x), net(x))


def test_mlp_forward_runs_every_hook_the_module_would():
    torch.manual_seed(0)
    net = mlp(4, [8], 2)
    x = torch.randn(5, 4)
    seen = []
    handle = net[0].register_forward_hook(lambda mod, inp, out: seen.append("layer") or out * 2)
    assert torch.equal(mlp_forward(net, x), net(x)) and seen == ["layer", "layer"]
    handle.remove()
    handle = net.register_forward_pre_hook(lambda mod, inp: seen.append("net"))
    mlp_forward(net, x)
    assert seen[-1] == "net"
    handle.remove()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda mod, inp, out: seen.append("global"))
    try:
        mlp_forward(net, x)
    finally:
        handle.remove()
    assert "global" in seen
    other = torch.nn.Linear(4, 2)  # not a Sequential: called as usual
    assert torch.equal(mlp_forward(other, x), other(x))
