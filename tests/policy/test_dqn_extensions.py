"""DQN extensions: the TD loss against hand-computed cases (vanilla, double, weighted, mse), dueling heads,
n-step returns, target-update schedules, epsilon by env steps, priorities handed back."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.algorithms.dqn import DQNPolicy, DuelingHead
from rlightning.policy.algorithms.nstep import NStepReturns
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_ret, offpolicy_dataset

META2 = EnvMeta("two", gym.spaces.Discrete(2), gym.spaces.Box(-10.0, 10.0, (2,), np.float32), 1)


def linear_dqn(**cfg) -> DQNPolicy:
    """A DQN whose Q network is one linear layer: Q(s) = s (online), Q'(s) = 2 * [s1, s0] (target)."""
    policy = DQNPolicy(PolicyConfig(type="dqn", hidden_sizes=[], gamma=0.5, **cfg))
    policy.setup(META2, seed=0)
    with torch.no_grad():
        (online,) = [m for m in policy.q.modules() if isinstance(m, torch.nn.Linear)]
        (target,) = [m for m in policy.modules["q_target"].modules() if isinstance(m, torch.nn.Linear)]
        online.weight.copy_(torch.eye(2))
        online.bias.zero_()
        target.weight.copy_(torch.tensor([[0.0, 2.0], [2.0, 0.0]]))
        target.bias.zero_()
    return policy


def hand_batch(**extra) -> TensorDict:
    # row 0: Q(s)=[1, 2], a=1 -> q=2; r=1; Q(s')=[3, 1] (argmax 0), Q'(s')=[2, 6]; not terminal.
    #   vanilla target 1 + 0.5 * 6 = 4 (td 2, huber 1.5); double target 1 + 0.5 * 2 = 2 (td 0).
    # row 1: Q(s)=[0.5, 0], a=0 -> q=0.5; r=-1; terminal -> target -1 (td -1.5, huber 1.0).
    data = {
        "obs": torch.tensor([[1.0, 2.0], [0.5, 0.0]]),
        "action": torch.tensor([1, 0]),
        "reward": torch.tensor([1.0, -1.0]),
        "next_obs": torch.tensor([[3.0, 1.0], [1.0, 1.0]]),
        "terminated": torch.tensor([False, True]),
    }
    data.update(extra)
    return TensorDict(data, batch_size=[2])


@pytest.mark.parametrize(
    ("cfg", "extra", "env_steps", "expected_loss", "expected_td"),
    [
        ({}, {}, None, 1.25, [2.0, 1.5]),
        ({"double_q": True}, {}, None, 0.5, [0.0, 1.5]),
        ({"loss": "mse"}, {}, None, (4.0 + 2.25) / 2, [2.0, 1.5]),
        # importance weights at the buffer's beta (0.5): used as they are
        ({"priority_beta_start": 0.5}, {"_weight": torch.tensor([1.0, 0.5])}, None, (1.5 + 0.5) / 2, [2.0, 1.5]),
        # annealed to beta 1 after priority_beta_steps env steps: w ** (1 / 0.5) = [1, 0.25]
        (
            {"priority_beta_start": 0.5, "priority_beta_steps": 100},
            {"_weight": torch.tensor([1.0, 0.5])},
            100,
            (1.5 + 0.25) / 2,
            [2.0, 1.5],
        ),
    ],
)
def test_td_loss_matches_hand_computed_values(cfg, extra, env_steps, expected_loss, expected_td):
    policy = linear_dqn(**cfg)
    if env_steps is not None:
        policy.set_env_steps(env_steps)
    policy.update_dataset(hand_batch(**extra))
    out = policy.loss(policy.dataset)
    assert out["loss"].item() == pytest.approx(expected_loss)
    np.testing.assert_allclose(out["td_error"].abs().numpy(), expected_td, rtol=1e-6)


def test_nstep_keys_feed_the_target():
    policy = linear_dqn(n_step=3)
    batch = hand_batch(
        nstep_reward=torch.tensor([2.0, 0.0]),
        nstep_next_obs=torch.tensor([[1.0, 0.0], [5.0, 5.0]]),
        nstep_discount=torch.tensor([0.125, 0.0]),
    )
    policy.update_dataset(batch)
    out = policy.loss(policy.dataset)
    # row 0: 2 + 0.125 * max(Q'([1, 0]) = [0, 2]) = 2.25 against q=2; row 1: 0 against q=0.5
    np.testing.assert_allclose(out["td_error"].numpy(), [0.25, -0.5], rtol=1e-6)
    del batch["nstep_discount"]
    with pytest.raises(KeyError, match=r"missing keys \['nstep_discount'\].*n-step post-process"):
        policy.update_dataset(batch)


def test_nstep_returns_by_hand_across_episode_boundaries():
    gamma = 0.5
    next_obs = torch.arange(7, dtype=torch.float32).unsqueeze(1)
    episodes = TensorDict(
        {
            "reward": torch.tensor([1.0, 2.0, 3.0, 4.0, 10.0, 20.0, 30.0]),
            "next_obs": next_obs,
            "terminated": torch.tensor([False, False, False, True, False, False, False]),
        },
        batch_size=[7],
    )
    out = NStepReturns(3, gamma).batched(episodes, torch.tensor([4, 3]))
    # episode 1 terminated: [1 + 1 + .75, 2 + 1.5 + 1, 3 + 2, 4]; episode 2 truncated: [10 + 10 + 7.5, 20 + 15, 30]
    np.testing.assert_allclose(out["nstep_reward"].numpy(), [2.75, 4.5, 5.0, 4.0, 27.5, 35.0, 30.0])
    np.testing.assert_allclose(out["nstep_discount"].numpy(), [0.125, 0.0, 0.0, 0.0, 0.125, 0.25, 0.5])
    np.testing.assert_array_equal(out["nstep_next_obs"].reshape(-1).numpy(), [2, 3, 3, 3, 6, 6, 6])
    single = NStepReturns(3, gamma)(episodes[:4].clone())
    np.testing.assert_allclose(single["nstep_reward"].numpy(), [2.75, 4.5, 5.0, 4.0])
    with pytest.raises(ValueError, match=r"NStepReturns\(n=0\) needs an int >= 1"):
        NStepReturns(0, gamma)
    assert DQNPolicy.buffer_postprocess_fn(PolicyConfig(type="dqn")) is None
    assert DQNPolicy.buffer_postprocess_fn(PolicyConfig(type="dqn", n_step=3)).n == 3


def test_dueling_head_is_value_plus_centred_advantage():
    head = DuelingHead(4, 3, [8], "relu")
    x = torch.randn(5, 4)
    q = head(x)
    adv = head.advantage(x)
    expected = head.value(x) + adv - adv.mean(-1, keepdim=True)
    torch.testing.assert_close(q, expected)
    policy = DQNPolicy(PolicyConfig(type="dqn", dueling=True, hidden_sizes=[16]))
    policy.setup(DISCRETE_META, seed=0)
    policy.update_dataset(offpolicy_dataset(obs_dim=4, discrete=True))
    assert np.isfinite(policy.train()["q_loss"])


def test_hard_target_update_every_interval_env_steps():
    policy = linear_dqn(tau=1.0, target_update_interval=10, optim={"lr": 0.1})
    target = policy.modules["q_target"]

    def same() -> bool:
        return all(torch.equal(a, b) for a, b in zip(policy.q.parameters(), target.parameters()))

    policy.set_env_steps(5)
    policy.update_dataset(hand_batch())
    policy.train()  # first call copies (mark 0), then the online network moves
    assert not same()
    before = [p.clone() for p in target.parameters()]
    policy.set_env_steps(9)
    policy.train()
    assert all(torch.equal(a, b) for a, b in zip(before, target.parameters()))  # same interval: untouched
    online_before = [p.clone() for p in policy.q.parameters()]
    policy.set_env_steps(10)
    policy.train()  # a new interval: copied before this call's update
    assert all(torch.equal(a, b) for a, b in zip(online_before, target.parameters()))


def test_gradient_steps_split_the_batch_and_priorities_come_back_once():
    policy = DQNPolicy(PolicyConfig(type="dqn", hidden_sizes=[16], gradient_steps=4))
    policy.setup(DISCRETE_META, seed=0)
    td = offpolicy_dataset(n=32, obs_dim=4, discrete=True)
    td["_index"] = torch.arange(100, 132)
    td["_shard"] = torch.full((32,), 2)
    td["_weight"] = torch.ones(32)
    policy.update_dataset(td)
    metrics = policy.train()
    assert policy.update_count == 4
    assert metrics["priority_beta"] == pytest.approx(0.4)
    update = policy.priority_update()
    torch.testing.assert_close(update["index"], torch.arange(100, 132))
    torch.testing.assert_close(update["shard"], torch.full((32,), 2))
    assert update["priority"].shape == (32,) and bool((update["priority"] > 0).all())
    assert policy.priority_update() is None
    with pytest.raises(ValueError, match="got 3 rows, fewer than gradient_steps=4"):
        policy.update_dataset(td[:3])


def test_epsilon_follows_the_synced_env_steps():
    learner = DQNPolicy(PolicyConfig(type="dqn", hidden_sizes=[8], epsilon_decay_steps=1000, epsilon_end=0.1))
    learner.setup(DISCRETE_META, seed=0)
    actor = DQNPolicy(
        PolicyConfig(type="dqn", hidden_sizes=[8], epsilon_decay_steps=1000, epsilon_end=0.1), PolicyRole.EVAL
    )
    actor.setup(DISCRETE_META, seed=1)
    assert actor.epsilon == pytest.approx(1.0)
    learner.set_env_steps(500)
    actor.copy_weights_from(learner)
    assert actor.epsilon == pytest.approx(0.55)
    actor.rollout_step(env_ret("Toy-0", num_envs=800))  # its own rows count when they are more
    assert actor.epsilon == pytest.approx(1.0 - 0.9 * 0.8)
    with pytest.raises(ValueError, match=r"set_env_steps\(env_steps=-1\) needs an int >= 0"):
        learner.set_env_steps(-1)
