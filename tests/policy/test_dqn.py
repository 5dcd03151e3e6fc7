"""DQN (rlightning/policy/algorithms/dqn.py): spaces, exploration, updates, learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.algorithms.dqn import DQNPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import OptimConfig, PolicyConfig
from rlightning.utils.registry import POLICIES
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META, env_ret, offpolicy_dataset


def make(meta=DISCRETE_META, role=PolicyRole.TRAIN, **cfg) -> DQNPolicy:
    cfg.setdefault("hidden_sizes", [32])
    cfg.setdefault("activation", "relu")
    policy = DQNPolicy(PolicyConfig(type="dqn", **cfg), role_type=role)
    policy.setup(meta, seed=0)
    return policy


def test_registered_as_dqn():
    assert POLICIES.get("dqn") is DQNPolicy


def test_continuous_action_space_is_rejected_by_name():
    with pytest.raises(
        ValueError, match=r"policy 'dqn' needs a discrete \(Discrete\) action space, got continuous Box"
    ):
        make(CONTINUOUS_META)


def test_epsilon_decays_with_rows_answered():
    policy = make(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_steps=100)
    assert policy.epsilon == pytest.approx(1.0)
    policy.rollout_step(env_ret("e", num_envs=50))
    assert policy.epsilon == pytest.approx(0.55)
    policy.rollout_step(env_ret("e", num_envs=100))
    assert policy.epsilon == pytest.approx(0.1)


def test_deterministic_actions_are_greedy():
    policy = make(role=PolicyRole.EVAL, deterministic_eval=True)
    obs = np.random.default_rng(0).standard_normal((32, 4)).astype(np.float32)
    greedy = policy.q(torch.as_tensor(obs)).argmax(-1).numpy()
    np.testing.assert_array_equal(policy.compute_actions(obs, deterministic=True)["action"], greedy)
    assert "q_target" not in policy.modules


def test_action_start_offset_roundtrip():
    meta = EnvMeta("e", gym.spaces.Discrete(3, start=-1), DISCRETE_META.observation_space, 1)
    policy = make(meta)
    actions = policy.rollout_step(env_ret("e", num_envs=200)).action
    assert set(np.unique(actions)) <= {-1, 0, 1}
    td = offpolicy_dataset(obs_dim=4, discrete=True)
    td["action"] = torch.full((32,), -1)
    policy.update_dataset(td)
    assert int(policy.dataset["action"].min()) == 0


def test_train_reports_and_moves_the_target():
    policy = make(tau=0.5)
    before = [p.clone() for p in policy.modules["q_target"].parameters()]
    policy.update_dataset(offpolicy_dataset(obs_dim=4, discrete=True))
    metrics = policy.train()
    assert set(metrics) == {"q_loss", "q_value"}
    assert any(not torch.equal(a, b) for a, b in zip(before, policy.modules["q_target"].parameters()))
    td = offpolicy_dataset(obs_dim=4, discrete=True)
    del td["reward"]
    with pytest.raises(KeyError, match=r"missing keys \['reward'\]"):
        policy.update_dataset(td)


def test_dqn_learns_a_contextual_bandit():
    meta = EnvMeta("b", gym.spaces.Discrete(3), gym.spaces.Box(0.0, 1.0, (3,), np.float32), 1)
    policy = make(meta, optim=OptimConfig(lr=1e-2), tau=0.1)
    rng = np.random.default_rng(0)
    n = 512
    state = rng.integers(0, 3, n)
    obs = np.eye(3, dtype=np.float32)[state]
    action = rng.integers(0, 3, n)
    data = TensorDict(
        {
            "obs": torch.as_tensor(obs),
            "action": torch.as_tensor(action),
            "reward": torch.as_tensor((action == state).astype(np.float32)),
            "next_obs": torch.as_tensor(obs),
            "terminated": torch.ones(n, dtype=torch.bool),
        },
        batch_size=[n],
    )
    for _ in range(200):
        policy.update_dataset(data[torch.randint(0, n, (64,))])
        policy.train()
    greedy = policy.compute_actions(np.eye(3, dtype=np.float32), deterministic=True)["action"]
    np.testing.assert_array_equal(greedy, [0, 1, 2])


@pytest.mark.parametrize("dueling", [False, True])
def test_q_network_init_torch_default_or_orthogonal(dueling):
    """init='torch' (SB3's and CleanRL's): nn.Linear's uniform init, biases included; 'orthogonal' (the default):
    the actor-critic init (zero biases, orthogonal columns). The target network starts as a copy either way."""
    torch_init = make(hidden_sizes=[64, 64], dueling=dueling, init="torch")
    ortho = make(hidden_sizes=[64, 64], dueling=dueling)
    for policy in (torch_init, ortho):
        for p, tp in zip(policy.q.parameters(), policy.modules["q_target"].parameters()):
            assert torch.equal(p, tp)
    linears = [m for m in torch_init.q.modules() if isinstance(m, torch.nn.Linear)]
    for layer in linears:
        bound = 1.0 / layer.in_features**0.5
        assert layer.weight.abs().max() <= bound and layer.bias.abs().max() <= bound
        assert layer.bias.abs().sum() > 0
    first = next(m for m in ortho.q.modules() if isinstance(m, torch.nn.Linear))
    assert torch.count_nonzero(first.bias) == 0
    w = first.weight  # 64 x obs_dim, orthogonal columns scaled by sqrt(2)
    assert torch.allclose(w.T @ w, 2.0 * torch.eye(w.shape[1]), atol=1e-4)


def test_unknown_init_is_refused_by_name():
    with pytest.raises(ValueError, match="init"):
        PolicyConfig(type="dqn", init="xavier")


def test_acting_copies_import_no_tensordict():
    """An env worker acting with a policy copy imports the policy package (every built-in algorithm, the n-step
    post-process included) but never tensordict (1-2 s of torch._dynamo per worker at a cold start)."""
    import subprocess
    import sys

    code = (
        "import sys, rlightning.policy.acting_copy, rlightning.policy.algorithms.dqn, rlightning.env.rollout_worker; "
        "print([m for m in sys.modules if m.split('.')[0] == 'tensordict'])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.parametrize("epsilon", [1.0, 0.5, 0.0])
def test_acting_draws_as_greedy_then_explore_and_skips_the_forward_when_every_row_explores(epsilon, monkeypatch):
    policy = make(role=PolicyRole.EVAL, epsilon_start=epsilon, epsilon_end=epsilon)
    obs = np.random.default_rng(3).normal(size=(6, 4)).astype(np.float32)
    greedy = policy.q_values(torch.as_tensor(obs)).argmax(-1).numpy()
    # the draws the acting rule makes: one uniform per row, then one action per exploring row
    reference = np.random.default_rng(11)
    explore = reference.random(6) < epsilon
    expected = greedy.copy()
    expected[explore] = reference.integers(0, 2, int(explore.sum()))
    policy.np_rng = np.random.default_rng(11)
    if epsilon == 1.0:  # every row explores: the Q network is never evaluated
        monkeypatch.setattr(policy, "q_values", lambda obs: pytest.fail("forward while every row explores"))
    np.testing.assert_array_equal(policy.compute_actions(obs)["action"], expected)
