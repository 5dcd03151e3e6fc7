"""The offline algorithms alone (no engine): their losses, acting through `StandalonePolicy`, and refusals."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.builder import resolve_policy_class
from rlightning.policy.standalone import StandalonePolicy
from rlightning.types import EnvMeta
from rlightning.utils.config import MainConfig, PolicyConfig

PENDULUM = gym.make("Pendulum-v1")
CARTPOLE = gym.make("CartPole-v1")
BOX = EnvMeta("e", PENDULUM.action_space, PENDULUM.observation_space, 1)
DISCRETE = EnvMeta("e", CARTPOLE.action_space, CARTPOLE.observation_space, 1)


def batch(meta: EnvMeta, n: int = 64, seed: int = 0) -> TensorDict:
    g = torch.Generator().manual_seed(seed)
    obs_dim = meta.observation_space.shape[0]
    if meta is BOX:
        action = torch.rand(n, 1, generator=g) * 4 - 2
    else:
        action = torch.randint(0, 2, (n,), generator=g)
    obs = torch.randn(n, obs_dim, generator=g)
    return TensorDict(
        {
            "obs": obs,
            "action": action,
            "reward": torch.randn(n, generator=g),
            "next_obs": obs + 0.1,
            "terminated": torch.zeros(n, dtype=torch.bool),
        },
        [n],
    )


def built(algo: str, meta: EnvMeta, **cfg):
    config = PolicyConfig(type=algo, hidden_sizes=[32, 32], **cfg)
    policy = resolve_policy_class(algo)(config)
    policy.construct_network(meta)
    policy.setup_optimizer(config.optim)
    return policy, config


@pytest.mark.parametrize(
    "algo,meta",
    [
        ("bc", BOX),
        ("bc", DISCRETE),
        ("td3_bc", BOX),
        ("cql", BOX),
        ("discrete_cql", DISCRETE),
        ("iql", BOX),
        ("discrete_iql", DISCRETE),
    ],
)
def test_each_algorithm_learns_on_batches_and_acts_standalone(algo, meta):
    policy, config = built(algo, meta)
    policy.update_dataset(batch(meta))
    first = policy.train()
    for _ in range(30):
        last = policy.train()
    assert all(np.isfinite(v) for v in last.values()) and policy.update_count >= 31
    loss = "bc_loss" if algo == "bc" else "q_loss"
    assert last[loss] < first[loss], (first, last)
    policy.update_dataset(batch(meta, n=128, seed=1))
    policy.train_minibatches(2)  # an engine's batched updates
    pi = StandalonePolicy.from_weights(MainConfig(policy=config), meta, policy.get_weights())
    action, _ = pi.predict(meta.observation_space.sample())
    assert meta.action_space.contains(np.asarray(action, dtype=meta.action_space.dtype))
    greedy = pi.predict(np.zeros((3, meta.observation_space.shape[0]), np.float32))[0]
    assert np.shape(greedy)[0] == 3


def test_td3_bc_actor_loss_is_the_papers():
    policy, _ = built("td3_bc", BOX, alpha=2.5)
    policy.update_dataset(batch(BOX))
    ds = policy.dataset
    x = policy.encoder(ds["obs"])
    pi = policy.actor(x)
    q = policy.modules["qf"](x, pi)[0]
    expected = -2.5 / q.abs().mean() * q.mean() + ((pi - ds["action"]) ** 2).mean()
    assert policy.actor_loss(ds["obs"]).item() == pytest.approx(expected.item(), rel=1e-5)


def test_cql_pushes_down_the_q_values_of_actions_outside_the_data():
    torch.manual_seed(0)
    data = batch(BOX, n=64)
    data["action"] = torch.full((64, 1), 1.5)  # the data only ever takes one action
    policy, _ = built("cql", BOX, cql_alpha=5.0, cql_n_actions=4, q_lr=3e-3)
    policy.update_dataset(data)
    for _ in range(25):
        metrics = policy.train()
    x = policy.encoder(policy.dataset["obs"])
    q_data = policy.modules["qf"](x, policy.dataset["action"]).mean().item()
    q_other = policy.modules["qf"](x, torch.full((64, 1), -1.5)).mean().item()
    assert q_other < q_data - 1.0, (q_data, q_other, metrics)


def test_iql_value_is_an_upper_expectile_of_the_target_critics():
    policy, _ = built("iql", BOX, expectile=0.9, q_lr=3e-3)
    policy.update_dataset(batch(BOX, n=128))
    for _ in range(80):
        policy.train()
    ds = policy.dataset
    x = policy.encoder(ds["obs"])
    with torch.no_grad():
        adv = policy.modules["qf_target"](x, ds["action"]).amin(0) - policy.value(x)
    assert (adv < 0).float().mean().item() > 0.6  # V sits above most of the Q-values at expectile 0.9


@pytest.mark.parametrize(
    "algo,meta,message",
    [
        ("cql", DISCRETE, "policy 'cql' needs continuous \\(Box\\) actions, got Discrete\\(2\\); .* 'discrete_cql'"),
        ("iql", DISCRETE, "policy 'iql' needs continuous \\(Box\\) actions, got Discrete\\(2\\)"),
        ("td3_bc", DISCRETE, "policy 'td3_bc' needs continuous \\(Box\\) actions, got Discrete\\(2\\)"),
        ("discrete_cql", BOX, "policy 'discrete_cql' needs Discrete actions, got Box.*use policy.type 'cql'"),
        ("iql", DISCRETE, "policy 'iql' needs continuous .* use policy.type 'discrete_iql'"),
        ("discrete_iql", BOX, "policy 'discrete_iql' needs Discrete actions, got Box.*use policy.type 'iql'"),
    ],
)
def test_an_action_space_the_algorithm_cannot_take_is_named(algo, meta, message):
    policy = resolve_policy_class(algo)(PolicyConfig(type=algo))
    with pytest.raises(ValueError, match=message):
        policy.construct_network(meta)


def test_missing_keys_are_listed():
    policy, _ = built("iql", BOX)
    with pytest.raises(KeyError, match=r"iql.update_dataset: missing keys \['next_obs'\]"):
        policy.update_dataset(batch(BOX).exclude("next_obs"))


def test_cql_behaviour_cloning_start_reads_the_density_sac_samples_with():
    policy, _ = built("cql", BOX)
    x = policy.encoder(batch(BOX)["obs"])
    with torch.no_grad():
        action, logp = policy.actor(x)
        assert torch.allclose(policy.actor.log_prob(x, action), logp, atol=1e-3)


def test_discrete_iql_prefers_the_better_action_of_an_evenly_split_dataset():
    # every state appears with both actions, half each: action 1 earns 1, action 0 earns 0, then the episode ends.
    # BC would clone the 50/50 split; IQL's advantage weights move the actor onto action 1, and its value sits
    # at the upper expectile of the two Q-values.
    torch.manual_seed(0)
    n = 128
    obs = torch.randn(n // 2, 4).repeat(2, 1)
    action = torch.cat([torch.zeros(n // 2), torch.ones(n // 2)]).long()
    data = TensorDict(
        {"obs": obs, "action": action, "reward": action.float(), "next_obs": obs,
         "terminated": torch.ones(n, dtype=torch.bool)},
        [n],
    )  # fmt: skip
    policy, _ = built("discrete_iql", DISCRETE, expectile=0.9, tau=0.05, q_lr=3e-3, optim={"lr": 3e-3})
    policy.update_dataset(data)
    for _ in range(100):
        metrics = policy.train()
    with torch.no_grad():
        x = policy.encoder(obs)
        p_better = torch.softmax(policy.actor(x), -1)[:, 1]
        v = policy.value(x)
    assert p_better.min().item() > 0.8, (p_better.min(), metrics)  # the weights put 0.95 on it
    assert 0.7 < v.mean().item() < 1.0, metrics  # the 0.9-expectile of {0, 1} is 0.9
    assert (policy.compute_actions(obs.numpy(), deterministic=True)["action"] == 1).all()


@pytest.mark.parametrize(
    "setting,message",
    [
        ({"target_update_interval": 10}, "discrete_iql learns offline.*target_update_interval"),
        ({"double_q": True}, "discrete_iql's target is r \\+ gamma V\\(s'\\).*double_q"),
        ({"gradient_steps": 4}, "discrete_iql makes one gradient step per train\\(\\).*updates_per_iteration"),
    ],
)
def test_discrete_iql_refuses_dqn_settings_that_do_not_apply_offline(setting, message):
    with pytest.raises(ValueError, match=message):
        PolicyConfig(type="discrete_iql", **setting)
