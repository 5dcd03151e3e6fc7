"""`train_minibatches`: k updates on consecutive rows of one dataset are the k (update_dataset, train) steps."""

from __future__ import annotations

import pytest
import torch

from rlightning.policy.algorithms.dqn import DQNPolicy
from rlightning.policy.algorithms.sac import SACPolicy
from rlightning.policy.algorithms.td3 import TD3Policy
from rlightning.policy.base_policy import BasePolicy
from rlightning.policy.minibatches import mean_metrics, slice_rows
from rlightning.utils.config import PolicyConfig
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META, offpolicy_dataset

K, B = 6, 16


def dqn(**cfg) -> DQNPolicy:
    base = dict(type="dqn", hidden_sizes=[16], tau=1.0, target_update_interval=10, optim={"lr": 0.01})
    policy = DQNPolicy(PolicyConfig(**{**base, **cfg}))
    policy.setup(DISCRETE_META, seed=0)
    policy.set_env_steps(1000)  # hard target updates counted in env steps: fixed for the phase
    return policy


def prioritized(data):
    n = data.batch_size[0]
    data["_index"] = torch.arange(n) * 3
    data["_shard"] = torch.arange(n) % 2
    data["_weight"] = torch.rand(n, generator=torch.Generator().manual_seed(4)) + 0.1
    return data


def per_step(policy, data, seed=0):
    """The engine's loop without batching: one update_dataset and one train per batch of B rows."""
    torch.manual_seed(seed)
    metrics, updates = [], []
    for i in range(K):
        policy.update_dataset(data[i * B : (i + 1) * B])
        metrics.append(policy.train())
        updates.append(policy.priority_update())
    return mean_metrics(metrics), updates


def batched(policy, data, seed=0):
    torch.manual_seed(seed)
    policy.update_dataset(data)
    return policy.train_minibatches(K)


def params(policy):
    return [p.detach().clone() for m in policy.modules.values() for p in m.parameters()]


@pytest.mark.parametrize(
    "cfg",
    [
        {},
        {"double_q": True, "dueling": True},
        {"norm_obs": True},  # running normalisation moves after each step: no targets ahead
        {"tau": 0.5, "target_update_interval": None},  # Polyak after every step: no targets ahead
        {"gradient_steps": 2},  # each train() splits its batch again
    ],
)
def test_dqn_minibatches_are_the_per_step_updates(cfg):
    data = offpolicy_dataset(n=K * B, obs_dim=4, discrete=True, seed=1)
    data["terminated"][::5] = True
    for ahead in (False, True):
        slow, fast = dqn(**cfg), dqn(**cfg)
        # both sides alike: with gradient_steps > 1 each train() can compute its targets ahead too (a forward
        # over all its rows instead of one per split, whose float rounding may differ by CPU kernel)
        fast.batched_targets = slow.batched_targets = ahead
        slow_m, _ = per_step(slow, data)
        fast_m = batched(fast, data)
        assert fast.update_count == slow.update_count == K * (cfg.get("gradient_steps") or 1)
        if not ahead:  # the very same computation
            assert all(torch.equal(a, b) for a, b in zip(params(fast), params(slow)))
            assert fast_m == slow_m
        else:  # targets of all rows in one forward: equal up to float rounding
            for a, b in zip(params(fast), params(slow)):
                torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
            assert fast_m == pytest.approx(slow_m, abs=1e-5)
        assert "target" not in fast.dataset and fast.dataset["obs"].shape[0] == K * B  # the whole set again


def test_dqn_targets_ahead_are_computed_after_the_phase_target_update():
    policy = dqn()
    policy.load_extra_checkpoint_state({"target_marks": 0, "env_steps": 1000})  # a hard copy is due (mark 100)
    with torch.no_grad():
        for p in policy.q.parameters():
            p.mul_(1.5)  # online != target until the copy
    seen = []
    loss = policy.loss

    def recording(batch):
        seen.append(batch["target"].clone())
        return loss(batch)

    policy.loss = recording
    policy.update_dataset(offpolicy_dataset(n=K * B, obs_dim=4, discrete=True, seed=2))
    ds = policy.dataset
    with torch.no_grad():  # the copied target network is today's online one
        expected = ds["reward"] + ds["discount"] * policy.q_values(ds["next_obs"]).max(-1).values
    stale = policy.td_targets(ds["reward"], ds["discount"], ds["next_obs"])  # the target network before the copy
    assert not torch.allclose(expected, stale)
    policy.train_minibatches(K)
    assert len(seen) == K
    torch.testing.assert_close(torch.cat(seen), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("double_q", [False, True])
def test_dqn_prioritized_minibatches_hand_back_every_steps_priorities(double_q):
    data = prioritized(offpolicy_dataset(n=K * B, obs_dim=4, discrete=True, seed=3))
    slow, fast = dqn(double_q=double_q), dqn(double_q=double_q)
    fast.batched_targets = False
    _, updates = per_step(slow, data)
    batched(fast, data)
    got = fast.priority_update()
    assert fast.priority_update() is None  # handed over once
    for key in ("index", "shard", "priority"):
        assert torch.equal(got[key], torch.cat([u[key] for u in updates])), key
    assert torch.equal(got["index"], data["_index"]) and bool((got["priority"] > 0).all())


@pytest.mark.parametrize(
    ("cls", "kind"),
    [(SACPolicy, "sac"), (TD3Policy, "td3")],
)
def test_sac_and_td3_minibatches_are_the_per_step_updates(cls, kind):
    def make():
        policy = cls(PolicyConfig(type=kind, hidden_sizes=[16]))
        policy.setup(CONTINUOUS_META, seed=0)
        return policy

    assert cls.minibatch_train
    data = offpolicy_dataset(n=K * B, obs_dim=3, act_dim=2, seed=5)
    slow, fast = make(), make()
    slow_m, _ = per_step(slow, data, seed=9)  # the same random draws (target noise, actor samples) in order
    fast_m = batched(fast, data, seed=9)
    assert all(torch.equal(a, b) for a, b in zip(params(fast), params(slow)))
    assert fast_m == slow_m
    assert fast.update_count == K


def test_bad_calls_say_what_is_wrong():
    policy = dqn()
    with pytest.raises(RuntimeError, match=r"train_minibatches called before update_dataset"):
        policy.train_minibatches(2)
    policy.update_dataset(offpolicy_dataset(n=4, obs_dim=4, discrete=True))
    with pytest.raises(ValueError, match=r"positive integer number of minibatches, got 0"):
        policy.train_minibatches(0)
    with pytest.raises(ValueError, match=r"holds 4 rows, fewer than one per minibatch"):
        policy.train_minibatches(5)
    with pytest.raises(TypeError, match=r"cannot split a list by rows"):
        slice_rows([1, 2], 0, 1)
    assert BasePolicy.minibatch_train is False  # a policy opts in: its dataset must split by rows


def test_mean_metrics_averages_numbers_and_keeps_the_rest():
    out = mean_metrics([{"a": 1.0, "b": "x", "c": True}, {"a": 2.0, "b": "y", "c": False}])
    assert out == {"a": 1.5, "b": "y", "c": False}
