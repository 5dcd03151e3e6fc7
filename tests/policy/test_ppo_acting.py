"""PPO's acting copies follow the networks the learner trains, through weight syncs; `call_module`."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from rlightning.policy.algorithms.acting_mlp import call_module
from rlightning.policy.algorithms.networks import mlp
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.utils.config import OptimConfig, PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_ret

# float32 rounding between a copy's batched forward and the learner's, for outputs of a few units
TOLERANCE = 2e-5


def _net(out: int = 2, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    return mlp(4, [64, 64], out, "tanh", out_gain=0.01)


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
        with torch.no_grad():  # the learner moves on: the copy must act with the synced weights
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
