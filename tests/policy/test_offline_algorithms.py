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
    [("bc", BOX), ("bc", DISCRETE), ("td3_bc", BOX), ("cql", BOX), ("discrete_cql", DISCRETE), ("iql", BOX)],
)
def test_each_algorithm_learns_on_batches_and_acts_standalone(algo, meta):
    policy, config = built(algo, meta)
    policy.update_dataset(batch(meta))
    first = policy.train()
    for _ in range(30):
        last = policy.train()
    assert all(np.isfinite(v) for v in last.values()) and policy.update_count >= 31
    loss = {"bc": "bc_loss", "td3_bc": "q_loss", "cql": "q_loss", "discrete_cql": "q_loss", "iql": "q_loss"}[algo]
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
    for _ in range(40):
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
