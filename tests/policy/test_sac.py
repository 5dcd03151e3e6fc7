"""SAC (rlightning/policy/algorithms/sac.py): spaces, acting, updates, learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.algorithms.sac import SACPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import OptimConfig, PolicyConfig
from rlightning.utils.registry import POLICIES
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META, env_ret, offpolicy_dataset


def make(meta=CONTINUOUS_META, role=PolicyRole.TRAIN, **cfg) -> SACPolicy:
    cfg.setdefault("hidden_sizes", [32, 32])
    cfg.setdefault("activation", "relu")
    policy = SACPolicy(PolicyConfig(type="sac", **cfg), role_type=role)
    policy.setup(meta, seed=0)
    return policy


def test_registered_as_sac():
    assert POLICIES.get("sac") is SACPolicy


def test_discrete_action_space_is_rejected_by_name():
    with pytest.raises(
        ValueError, match=r"policy 'sac' needs a continuous \(Box\) action space, got discrete Discrete"
    ):
        make(DISCRETE_META)


def test_unbounded_box_is_rejected():
    meta = EnvMeta("e", gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), CONTINUOUS_META.observation_space, 1)
    with pytest.raises(ValueError, match="needs finite action bounds"):
        make(meta)


def test_actions_stay_in_the_box_and_deterministic_is_repeatable():
    box = gym.spaces.Box(np.array([0.0, -3.0], np.float32), np.array([1.0, -1.0], np.float32), dtype=np.float32)
    meta = EnvMeta("e", box, CONTINUOUS_META.observation_space, 1)
    policy = make(meta)
    resp = policy.rollout_step(env_ret("e", num_envs=256, obs_dim=3))
    assert resp.action.shape == (256, 2) and resp.action.dtype == np.float32
    assert (resp.action[:, 0] >= 0).all() and (resp.action[:, 0] <= 1).all()
    assert (resp.action[:, 1] >= -3).all() and (resp.action[:, 1] <= -1).all()
    policy.set_deterministic(True)
    ret = env_ret("e", num_envs=8, obs_dim=3)
    np.testing.assert_array_equal(policy.rollout_step(ret).action, policy.rollout_step(ret).action)


def test_eval_worker_builds_only_what_acting_needs_and_loads_train_weights():
    train, evaluator = make(), make(role=PolicyRole.EVAL)
    assert set(train.modules) == {"encoder", "actor", "qf", "qf_target", "log_alpha"}
    assert set(evaluator.modules) == {"encoder", "actor"}
    evaluator.load_state_dict(train.get_weights(), weight_version=1)
    assert evaluator.weights_checksum() == train.weights_checksum()


def test_update_dataset_checks_keys():
    policy = make()
    td = offpolicy_dataset()
    del td["next_obs"]
    with pytest.raises(KeyError, match=r"sac.update_dataset: missing keys \['next_obs'\]"):
        policy.update_dataset(td)
    with pytest.raises(TypeError, match="needs a TensorDict"):
        policy.update_dataset([1])


def test_train_is_one_update_with_target_averaging():
    policy = make(policy_frequency=1, tau=0.5)
    target_before = [p.clone() for p in policy.modules["qf_target"].parameters()]
    policy.update_dataset(offpolicy_dataset())
    metrics = policy.train()
    assert {"q_loss", "actor_loss", "alpha", "alpha_loss", "q_value"} <= set(metrics)
    assert policy.update_count == 1
    moved = [not torch.equal(a, b) for a, b in zip(target_before, policy.modules["qf_target"].parameters())]
    assert any(moved)
    assert metrics["alpha"] != pytest.approx(0.2, abs=1e-9)


def test_fixed_alpha_without_autotune():
    policy = make(autotune_alpha=False, alpha=0.1, policy_frequency=1)
    policy.update_dataset(offpolicy_dataset())
    assert policy.train()["alpha"] == pytest.approx(0.1)
    assert "alpha" not in policy.optimizers


def test_sac_learns_a_one_step_bandit():
    meta = EnvMeta("b", gym.spaces.Box(-1.0, 1.0, (1,), np.float32), gym.spaces.Box(-1.0, 1.0, (1,), np.float32), 1)
    policy = make(meta, optim=OptimConfig(lr=3e-3), policy_frequency=1, target_entropy=-4.0)
    rng = np.random.default_rng(0)
    n = 2048
    obs = rng.uniform(-0.8, 0.8, (n, 1)).astype(np.float32)
    action = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    reward = -((action - obs) ** 2).sum(-1).astype(np.float32)
    data = TensorDict(
        {
            "obs": torch.as_tensor(obs),
            "action": torch.as_tensor(action),
            "reward": torch.as_tensor(reward),
            "next_obs": torch.as_tensor(obs),
            "terminated": torch.ones(n, dtype=torch.bool),
        },
        batch_size=[n],
    )
    for _ in range(300):
        policy.update_dataset(data[torch.randint(0, n, (256,))])
        policy.train()
    test_obs = np.linspace(-0.8, 0.8, 64, dtype=np.float32)[:, None]
    act = policy.compute_actions(test_obs, deterministic=True)["action"]
    assert float(np.mean((act - test_obs) ** 2)) < 0.03


def test_fused_optimizer_builds_fused_adams_that_learn_as_the_unfused_ones():
    plain, fused = make(fused_optimizer=False), make()  # fused is the default
    assert all(not o.defaults.get("fused") for o in plain.optimizers.values())
    assert set(fused.optimizers) == {"actor", "critic", "alpha"}
    assert all(o.defaults["fused"] for o in fused.optimizers.values())
    for policy in (plain, fused):
        torch.manual_seed(5)  # the same noise draws on both sides
        policy.update_dataset(offpolicy_dataset(64))
        for _ in range(3):
            policy.train()
    for (key, a), (_, b) in zip(plain.state_dict().items(), fused.state_dict().items()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=key)
