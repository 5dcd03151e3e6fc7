"""DQN's train phase: TD targets computed once for all minibatches against the per-minibatch path, targets taken
from the target network as it is at each step, and the fused optimizer."""

from __future__ import annotations

from typing import Dict, List

import pytest
import torch

from rlightning.policy.algorithms.dqn import DQNPolicy
from rlightning.utils.config import PolicyConfig
from tests.policy.test_dqn_extensions import hand_batch, linear_dqn
from tests.support.policy_data import DISCRETE_META, offpolicy_dataset


def record_steps(policy: DQNPolicy, check_targets: bool = False) -> List[Dict[str, torch.Tensor]]:
    """Wrap ``policy.loss`` to record each gradient step's rows, TD targets and loss.

    ``check_targets``: also assert that the targets a step uses are the ones the target network gives at
    that moment, computed on the step's rows alone.
    """
    steps: List[Dict[str, torch.Tensor]] = []
    loss = policy.loss

    def recording(batch):
        out = loss(batch)
        target = (out["td_error"] + out["q"]).detach()
        if check_targets:
            alone = policy.td_targets(batch["reward"], batch["discount"], batch["next_obs"])
            torch.testing.assert_close(target, alone, atol=1e-6, rtol=1e-6)
        steps.append({"obs": batch["obs"].clone(), "target": target, "loss": out["loss"].detach().clone()})
        return out

    policy.loss = recording
    return steps


def seed_putting_first(row: int, n: int) -> int:
    """A torch seed whose ``randperm(n)`` (train()'s minibatch order) starts with ``row``."""
    for seed in range(1000):
        torch.manual_seed(seed)
        if int(torch.randperm(n)[0]) == row:
            return seed
    raise AssertionError("no seed found")


def train_both_ways(make, data, env_steps=None):
    """Train two identical policies once on ``data`` (same minibatch order): batched targets, then per step."""
    runs = []
    for batched in (True, False):
        policy = make()
        policy.batched_targets = batched
        if env_steps is not None:
            policy.set_env_steps(env_steps)
        steps = record_steps(policy)
        policy.update_dataset(data)
        torch.manual_seed(123)  # the minibatch order (randperm)
        metrics = policy.train()
        runs.append((policy, steps, metrics))
    return runs


@pytest.mark.parametrize("double_q", [False, True])
def test_batched_targets_match_per_step_on_the_hand_made_case(double_q):
    def make():
        policy = linear_dqn(double_q=double_q, tau=1.0, target_update_interval=10, gradient_steps=2, optim={"lr": 0.1})
        # env steps 5 in the interval already marked: no copy at the phase start, the hand-made target stays
        policy.load_extra_checkpoint_state({"target_marks": 0, "env_steps": 5})
        return policy

    (fast, fast_steps, fast_m), (slow, slow_steps, slow_m) = train_both_ways(make, hand_batch())
    assert fast._target_fixed_for_phase()
    assert len(fast_steps) == len(slow_steps) == 2
    for a, b in zip(fast_steps, slow_steps):
        torch.testing.assert_close(a["obs"], b["obs"])
        torch.testing.assert_close(a["target"], b["target"], atol=1e-6, rtol=0)
        torch.testing.assert_close(a["loss"], b["loss"], atol=1e-6, rtol=0)
    # by hand (see hand_batch): row 0's target is 4 (plain) or, for its first step, 2 (double); row 1 is terminal: -1
    first_is_row0 = bool(fast_steps[0]["obs"][0, 0] == 1.0)
    by_row = {bool(s["obs"][0, 0] == 1.0): float(s["target"][0]) for s in fast_steps}
    assert by_row[False] == pytest.approx(-1.0)
    if not double_q or first_is_row0:
        assert by_row[True] == pytest.approx(2.0 if double_q else 4.0)
    assert fast_m["q_loss"] == pytest.approx(slow_m["q_loss"], abs=1e-6)
    for p, q in zip(fast.q.parameters(), slow.q.parameters()):
        torch.testing.assert_close(p, q, atol=1e-6, rtol=0)


def test_double_q_argmax_follows_the_online_network_step_by_step():
    # Q(s) = s online, Q'(s) = 2 * [s1, s0] target, gamma 0.5 (linear_dqn). Row A ([1, 0], action 0, reward 10,
    # terminal) goes first: its Adam step (about lr on each moved weight) raises Q(., 0) by 0.1 at s = [1, 0]
    # and by 0.2 at s' = [1, 1.01], so row B's next action flips from 1 (Q 1.01 > 1.0) to 0 (1.2 > 1.01):
    # B's target is 0.5 * Q'(s')[0] = 0.5 * 2.02 = 1.01, not 0.5 * Q'(s')[1] = 1.0.
    data = hand_batch()
    data["obs"] = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    data["action"] = torch.tensor([0, 1])
    data["reward"] = torch.tensor([10.0, 0.0])
    data["next_obs"] = torch.tensor([[0.0, 0.0], [1.0, 1.01]])
    data["terminated"] = torch.tensor([True, False])
    seed = seed_putting_first(row=0, n=2)
    targets = []
    for batched in (True, False):
        policy = linear_dqn(double_q=True, tau=1.0, target_update_interval=10, gradient_steps=2, optim={"lr": 0.1})
        policy.load_extra_checkpoint_state({"target_marks": 0, "env_steps": 5})
        policy.batched_targets = batched
        steps = record_steps(policy)
        policy.update_dataset(data)
        torch.manual_seed(seed)
        policy.train()
        assert [float(s["obs"][0, 0]) for s in steps] == [1.0, 0.0]  # A, then B
        targets.append([float(s["target"][0]) for s in steps])
    assert targets[0] == pytest.approx([10.0, 1.01], abs=1e-5)
    assert targets[0] == pytest.approx(targets[1], abs=1e-6)


@pytest.mark.parametrize("double_q", [False, True])
def test_batched_targets_match_per_step_with_priorities(double_q):
    data = offpolicy_dataset(n=64, obs_dim=4, discrete=True, seed=3)
    data["_index"] = torch.arange(64)
    data["_shard"] = torch.zeros(64, dtype=torch.long)
    data["_weight"] = torch.rand(64, generator=torch.Generator().manual_seed(4)) + 0.1

    def make():
        cfg = PolicyConfig(
            type="dqn", hidden_sizes=[16], double_q=double_q, tau=1.0, target_update_interval=10, gradient_steps=8
        )
        policy = DQNPolicy(cfg)
        policy.setup(DISCRETE_META, seed=0)
        return policy

    (fast, fast_steps, fast_m), (slow, slow_steps, slow_m) = train_both_ways(make, data, env_steps=1000)
    assert len(fast_steps) == len(slow_steps) == 8
    for a, b in zip(fast_steps, slow_steps):
        torch.testing.assert_close(a["target"], b["target"], atol=1e-6, rtol=0)
        torch.testing.assert_close(a["loss"], b["loss"], atol=1e-6, rtol=0)
    assert fast_m == pytest.approx(slow_m, abs=1e-6)
    fast_update, slow_update = fast.priority_update(), slow.priority_update()
    torch.testing.assert_close(fast_update["index"], slow_update["index"])
    torch.testing.assert_close(fast_update["priority"], slow_update["priority"], atol=1e-6, rtol=0)
    assert bool((fast_update["priority"] > 0).all())


@pytest.mark.parametrize(
    ("cfg", "env_steps"),
    [
        ({"tau": 1.0, "target_update_interval": 10}, 1000),  # fixed for the phase: computed ahead
        ({"tau": 1.0, "target_update_interval": 10, "double_q": True}, 1000),
        ({"tau": 1.0, "target_update_interval": 2}, None),  # counted in gradient steps: moves inside the phase
        ({"tau": 0.5}, 1000),  # Polyak after every gradient step
        ({"tau": 0.5, "double_q": True}, None),
    ],
)
def test_each_step_uses_the_target_network_as_it_is_then(cfg, env_steps):
    policy = DQNPolicy(PolicyConfig(type="dqn", hidden_sizes=[16], gradient_steps=4, optim={"lr": 0.05}, **cfg))
    policy.setup(DISCRETE_META, seed=0)
    if env_steps is not None:
        policy.set_env_steps(env_steps)
    steps = record_steps(policy, check_targets=True)
    policy.update_dataset(offpolicy_dataset(n=32, obs_dim=4, discrete=True))
    policy.train()
    policy.train()
    assert len(steps) == 8
    assert policy._target_fixed_for_phase() == ("target_update_interval" in cfg and env_steps is not None)


@pytest.mark.parametrize("fused", [True, False])
def test_fused_optimizer_is_the_same_update(fused):
    def make(flag):
        policy = DQNPolicy(PolicyConfig(type="dqn", hidden_sizes=[32], gradient_steps=4, fused_optimizer=flag))
        policy.setup(DISCRETE_META, seed=0)
        return policy

    policy, reference = make(fused), make(False)
    assert isinstance(policy._optimizers["main"], torch.optim.Adam)
    assert bool(policy._optimizers["main"].defaults["fused"]) is fused
    assert policy._optimizers["main"].defaults["lr"] == reference._optimizers["main"].defaults["lr"]
    data = offpolicy_dataset(n=64, obs_dim=4, discrete=True)
    for p in (policy, reference):
        p.update_dataset(data)
        torch.manual_seed(7)
        for _ in range(3):
            p.train()
    for a, b in zip(policy.q.parameters(), reference.q.parameters()):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert any(not torch.equal(a, b) for a, b in zip(policy.q.parameters(), make(False).q.parameters()))


def test_sgd_is_left_as_it_is():
    policy = DQNPolicy(PolicyConfig(type="dqn", hidden_sizes=[8], optim={"name": "sgd"}))
    policy.setup(DISCRETE_META, seed=0)
    assert type(policy._optimizers["main"]) is torch.optim.SGD
