"""A2C (rlightning/policy/algorithms/a2c.py): its loss by hand, one step per train(), the GAE post-process."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.algorithms.a2c import A2CConfig, A2CPolicy
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META, ppo_dataset


def make(meta=DISCRETE_META, **cfg) -> A2CPolicy:
    cfg.setdefault("hidden_sizes", [16])
    policy = A2CPolicy(PolicyConfig(type="a2c", **cfg))
    policy.setup(meta, seed=0)
    return policy


def test_registered_with_its_config():
    assert POLICIES.get("a2c") is A2CPolicy
    assert type(PolicyConfig(type="a2c")) is A2CConfig
    with pytest.raises(ValueError, match="num_minibatches"):
        PolicyConfig(type="a2c", num_minibatches=4)
    post = A2CPolicy.buffer_postprocess_fn(PolicyConfig(type="a2c", gamma=0.9))
    assert (post.gamma, post.gae_lambda) == (0.9, 1.0)


def test_loss_by_hand_with_a_uniform_actor_and_a_zero_critic():
    policy = make(ent_coef=0.1, vf_coef=0.5)
    for module in (policy.actor, policy.critic):
        last = [m for m in module.modules() if isinstance(m, torch.nn.Linear)][-1]
        with torch.no_grad():
            last.weight.zero_()
            last.bias.zero_()
    adv, ret = torch.tensor([1.0, -2.0, 4.0]), torch.tensor([2.0, 0.0, -1.0])
    td = TensorDict(
        {
            "obs": torch.randn(3, 4),
            "action": torch.tensor([0, 1, 1]),
            "log_prob": torch.full((3,), math.log(0.5)),
            "value": torch.zeros(3),
            "advantage": adv,
            "return": ret,
        },
        batch_size=[3],
    )
    policy.update_dataset(td)
    out = policy.loss(policy.dataset)
    # log pi = log 0.5 for both actions, V = 0, entropy = log 2
    policy_loss = -float(adv.mean()) * math.log(0.5)
    value_loss = (4.0 + 0.0 + 1.0) / 3
    assert out["policy_loss"].item() == pytest.approx(policy_loss)
    assert out["value_loss"].item() == pytest.approx(value_loss)
    assert out["entropy"].item() == pytest.approx(math.log(2))
    assert out["loss"].item() == pytest.approx(policy_loss - 0.1 * math.log(2) + 0.5 * value_loss)


@pytest.mark.parametrize("meta", [DISCRETE_META, CONTINUOUS_META])
def test_one_gradient_step_per_train(meta):
    policy = make(meta)
    dim = 2 if meta is CONTINUOUS_META else 0
    policy.update_dataset(ppo_dataset(n=64, obs_dim=meta.observation_space.shape[0], continuous_dim=dim))
    before = [p.clone() for p in policy.get_trainable_parameters()]
    metrics = policy.train()
    assert policy.update_count == 1
    assert set(metrics) == {"policy_loss", "value_loss", "entropy", "explained_variance", "lr"}
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.get_trainable_parameters()))
