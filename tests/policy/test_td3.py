"""TD3 (rlightning/policy/algorithms/td3.py): the critic target by hand, smoothing noise bounds, delayed actor
and target updates, exploration (uniform first, then Gaussian inside the Box), deterministic acting."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlightning.policy.algorithms.td3 import TD3Policy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META, env_ret, offpolicy_dataset

META1 = EnvMeta("one", gym.spaces.Box(-2.0, 2.0, (1,), np.float32), gym.spaces.Box(-5.0, 5.0, (1,), np.float32), 1)


def make(meta=CONTINUOUS_META, role=PolicyRole.TRAIN, **cfg) -> TD3Policy:
    cfg.setdefault("hidden_sizes", [16])
    policy = TD3Policy(PolicyConfig(type="td3", **cfg), role_type=role)
    policy.setup(meta, seed=0)
    return policy


def _set_linear(module, weight, bias):
    (layer,) = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(weight))
        layer.bias.copy_(torch.tensor(bias))


def _set_twin(module, weights, biases):
    """Set a one-layer `TwinQNetwork`: critic c computes ``weights[c] @ [s, a] + biases[c]`` (nn.Linear layout)."""
    with torch.no_grad():
        module.weight0.copy_(torch.tensor(weights).transpose(1, 2))
        module.bias0.copy_(torch.tensor(biases).reshape(2, 1, 1))


def test_registered_and_rejects_discrete_actions():
    assert POLICIES.get("td3") is TD3Policy
    with pytest.raises(ValueError, match=r"policy 'td3' needs a continuous \(Box\) action space"):
        make(DISCRETE_META)


def test_critic_target_and_losses_by_hand():
    # Linear networks: pi'(s) = 2 tanh(s) (the target actor), Q1'(s, a) = s + a, Q2'(s, a) = 2s + a,
    # Q1(s, a) = a, Q2(s, a) = 0. No smoothing noise.
    policy = make(META1, hidden_sizes=[], gamma=0.5, target_policy_noise=0.0)
    _set_linear(policy.modules["actor_target"], [[1.0]], [0.0])
    _set_twin(policy.modules["qf_target"], [[[1.0, 1.0]], [[2.0, 1.0]]], [0.0, 0.0])
    _set_twin(policy.modules["qf"], [[[0.0, 1.0]], [[0.0, 0.0]]], [0.0, 0.0])
    next_obs = torch.tensor([[1.0], [-1.0]])
    a_next = 2 * torch.tanh(next_obs).squeeze(1)
    # row 0: min(1 + a', 2 + a') = 1 + a'; row 1: min(-1 + a', -2 + a') = -2 + a', terminal -> no bootstrap
    target = policy.critic_target(torch.tensor([1.0, 3.0]), torch.tensor([0.0, 1.0]), next_obs)
    torch.testing.assert_close(target, torch.stack([1 + 0.5 * (1 + a_next[0]), torch.tensor(3.0)]))
    ds = {
        "obs": torch.tensor([[0.0], [0.0]]),
        "action": torch.tensor([[1.0], [-1.0]]),
        "reward": torch.tensor([1.0, 3.0]),
        "terminated": torch.tensor([0.0, 1.0]),
        "next_obs": next_obs,
    }
    loss = policy.critic_loss(ds)["loss"]
    q1 = torch.tensor([1.0, -1.0])
    expected = ((q1 - target) ** 2).mean() + (target**2).mean()
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    # actor loss: -mean Q1(s, pi(s)) = -mean pi(s) with Q1(s, a) = a
    _set_linear(policy.actor, [[1.0]], [0.0])
    obs = torch.tensor([[0.5], [-2.0]])
    assert policy.actor_loss(obs).item() == pytest.approx(-(2 * torch.tanh(obs)).mean().item(), rel=1e-6)


def test_smoothing_noise_stays_clipped_inside_the_box():
    policy = make(META1, hidden_sizes=[], gamma=1.0, target_policy_noise=10.0, target_noise_clip=0.5)
    # With Q' = a (weights on the action only), the target minus reward is the smoothed action.
    _set_twin(policy.modules["qf_target"], [[[0.0, 1.0]], [[0.0, 1.0]]], [0.0, 0.0])
    next_obs = torch.zeros(2000, 1)
    base = policy.modules["actor_target"](next_obs)
    smoothed = policy.critic_target(torch.zeros(2000), torch.zeros(2000), next_obs)
    delta = smoothed - base.squeeze(1)
    assert float(delta.abs().max()) <= 0.5 * 2.0 + 1e-5  # clip 0.5 of the half-range 2
    assert float(delta.std()) > 0.5
    assert float(smoothed.abs().max()) <= 2.0 + 1e-5


def test_delayed_actor_and_target_updates():
    policy = make(policy_delay=2)
    actor_before = [p.clone() for p in policy.actor.parameters()]
    target_before = [p.clone() for p in policy.modules["qf_target"].parameters()]
    policy.update_dataset(offpolicy_dataset(obs_dim=3, act_dim=2))
    policy.train()
    assert all(torch.equal(a, b) for a, b in zip(actor_before, policy.actor.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(target_before, policy.modules["qf_target"].parameters()))
    metrics = policy.train()
    assert set(metrics) == {"q_loss", "q_value", "actor_loss"}
    assert any(not torch.equal(a, b) for a, b in zip(actor_before, policy.actor.parameters()))
    assert any(not torch.equal(a, b) for a, b in zip(target_before, policy.modules["qf_target"].parameters()))


def test_acting_uniform_then_noisy_then_deterministic():
    policy = make(role=PolicyRole.EVAL, uniform_steps=100, exploration_noise=0.1)
    assert "qf" not in policy.modules
    first = policy.rollout_step(env_ret("ToyC-0", num_envs=100, obs_dim=3)).action
    assert first.shape == (100, 2) and float(first.std()) > 0.5  # uniform over [-2, 2]
    obs = np.random.default_rng(0).standard_normal((64, 3)).astype(np.float32)
    greedy = policy.compute_actions(obs, deterministic=True)["action"]
    noisy = policy.compute_actions(obs)["action"]
    assert 0.0 < float(np.abs(noisy - greedy).mean()) < 0.5
    assert float(np.abs(noisy).max()) <= 2.0
    np.testing.assert_array_equal(policy.compute_actions(obs, deterministic=True)["action"], greedy)


def test_fused_optimizer_builds_fused_adams_that_learn_as_the_unfused_ones():
    plain, fused = make(fused_optimizer=False), make()  # fused is the default
    assert all(o.defaults["fused"] for o in fused.optimizers.values()) and len(fused.optimizers) == 2
    assert all(not o.defaults.get("fused") for o in plain.optimizers.values())
    for policy in (plain, fused):
        torch.manual_seed(5)
        policy.update_dataset(offpolicy_dataset(64))
        for _ in range(4):
            policy.train()
    for (key, a), (_, b) in zip(plain.state_dict().items(), fused.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=key)
