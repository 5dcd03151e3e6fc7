"""BasePolicy: construction, the rollout contract, weights, checkpoints (local workers)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.types import EnvRet, PolicyResponse
from rlightning.utils.config import PolicyConfig
from tests.support.policy_data import DISCRETE_META, env_ret, ppo_dataset
from tests.support.policy_workers import AsyncEchoPolicy, EchoPolicy


def make_ppo(role=PolicyRole.TRAIN, **cfg) -> PPOPolicy:
    policy = PPOPolicy(PolicyConfig(hidden_sizes=[16], **cfg), role_type=role)
    policy.setup(DISCRETE_META, seed=0)
    return policy


def test_policy_role_values_and_class_names():
    assert PolicyRole("train") is PolicyRole.TRAIN
    assert f"{PolicyRole.EVAL}" == "eval"
    assert make_ppo().policy_class_name() == "PPOPolicy"


def test_base_policy_is_not_a_module_and_train_is_the_rl_update():
    policy = make_ppo()
    assert not isinstance(policy, torch.nn.Module)
    policy.update_dataset(ppo_dataset())
    assert "policy_loss" in policy.train()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"config": {"type": "ppo"}}, TypeError, "needs a PolicyConfig, got dict"),
        ({"role_type": "learner"}, ValueError, "role_type='learner' is not a PolicyRole"),
        ({"worker_index": -1}, ValueError, "worker_index=-1 must be an int >= 0"),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs, error, match):
    args = {"config": PolicyConfig(), "role_type": PolicyRole.TRAIN, "worker_index": 0, **kwargs}
    with pytest.raises(error, match=match):
        PPOPolicy(args.pop("config"), **args)


def test_rollout_step_follows_the_response_contract():
    policy = make_ppo()
    policy.set_weight_version(7)
    ret = env_ret("CartPole-v1-0", num_envs=3)
    resp = policy.rollout_step(ret)
    assert isinstance(resp, PolicyResponse)
    assert resp.env_id == "CartPole-v1-0"
    assert resp.action.shape == (3,) and resp.action.dtype == np.int64
    assert resp.log_prob.shape == (3,) and resp.value.shape == (3,)
    assert resp.weight_version == 7
    assert resp.ts_env_sent_ns == ret.ts_env_sent_ns
    assert resp.ts_policy_sent_ns >= ret.ts_env_sent_ns
    assert set(resp.to_dict()) == {"action", "log_prob", "value"}


def test_single_env_keeps_its_leading_dimension():
    resp = make_ppo().rollout_step(env_ret("e", num_envs=1))
    assert resp.action.shape == (1,)


def test_rollout_batch_is_one_forward_pass_split_per_env():
    policy = EchoPolicy(PolicyConfig(), role_type=PolicyRole.EVAL, worker_index=2)
    policy.setup(DISCRETE_META)
    rets = [env_ret(f"e{i}", num_envs=n, seed=i) for i, n in enumerate((1, 3, 2))]
    out = policy.rollout_batch(rets)
    assert policy.forward_calls == 1
    assert [r.env_id for r in out] == ["e0", "e1", "e2"]
    assert [r.action.shape[0] for r in out] == [1, 3, 2]
    assert all((r.action == 2).all() for r in out)
    single = [policy.rollout_step(r) for r in rets]
    for a, b in zip(out, single):
        np.testing.assert_allclose(a.value, b.value, rtol=1e-6)


def test_observation_without_leading_env_dim_is_rejected():
    policy = make_ppo()
    bad = EnvRet(env_id="e", observation=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"EnvRet 'e': observation shape \(4,\) is not \[num_envs, \*\(4,\)\]"):
        policy.rollout_step(bad)


def test_rollout_before_construct_network_is_a_clear_error():
    policy = PPOPolicy(PolicyConfig())
    with pytest.raises(RuntimeError, match="before construct_network"):
        policy.rollout_step(env_ret("e"))


def test_rollout_batch_rejects_items_that_are_not_env_rets():
    with pytest.raises(TypeError, match="expects EnvRet items, got dict at position 1"):
        make_ppo().rollout_batch([env_ret("a"), {"observation": 1}])


def test_async_rollout_step_is_awaited_by_rollout_batch():
    policy = AsyncEchoPolicy(PolicyConfig(), role_type=PolicyRole.EVAL)
    policy.setup(DISCRETE_META)
    out = policy.rollout_batch([env_ret("a", 2), env_ret("b", 1)])
    assert [r.env_id for r in out] == ["a", "b"]
    assert [r.action.shape for r in out] == [(2,), (1,)]


def test_deterministic_eval_and_set_deterministic():
    assert make_ppo(PolicyRole.EVAL, deterministic_eval=True).deterministic
    assert not make_ppo(PolicyRole.TRAIN, deterministic_eval=True).deterministic
    policy = make_ppo()
    policy.set_deterministic(True)
    ret = env_ret("e", num_envs=16)
    a, b = policy.rollout_step(ret), policy.rollout_step(ret)
    np.testing.assert_array_equal(a.action, b.action)


def test_get_weights_is_numpy_and_load_state_dict_roundtrips():
    src, dst = make_ppo(), make_ppo(PolicyRole.EVAL)
    dst.setup(DISCRETE_META, seed=123)
    weights = src.get_weights()
    assert all(isinstance(v, np.ndarray) for v in weights.values())
    assert src.weights_checksum() != dst.weights_checksum()
    dst.load_state_dict(weights, weight_version=3)
    assert dst.weights_checksum() == src.weights_checksum()
    assert dst.weight_version == 3


def test_load_state_dict_rejects_bad_input_without_partial_load():
    policy = make_ppo()
    before = policy.weights_checksum()
    weights = policy.get_weights()
    key = next(iter(weights))
    with pytest.raises(KeyError, match="missing keys"):
        policy.load_state_dict({k: v for k, v in weights.items() if k != key})
    bad = {k: v + 1.0 for k, v in weights.items()}
    last = sorted(bad)[-1]
    bad[last] = np.zeros((99,), np.float32)
    with pytest.raises(ValueError, match=rf"{last!r} has shape \(99,\)"):
        policy.load_state_dict(bad)
    with pytest.raises(TypeError, match="needs a dict"):
        policy.load_state_dict([1, 2])
    assert policy.weights_checksum() == before


def test_checkpoint_roundtrip_restores_weights_optimizer_counters_and_obs_stats(tmp_path):
    policy = make_ppo(norm_obs=True)
    policy.update_dataset(ppo_dataset(seed=1))
    policy.train()
    policy.set_weight_version(5)
    path = policy.save_checkpoint(tmp_path / "ckpt" / "policy.pt")
    restored = make_ppo(norm_obs=True)
    restored.setup(DISCRETE_META, seed=99)
    counters = restored.load_checkpoint(path)
    assert counters == {"weight_version": 5, "update_count": policy.update_count, "train_calls": 1}
    assert restored.weights_checksum() == policy.weights_checksum()
    assert torch.equal(restored.encoder.rms.mean, policy.encoder.rms.mean)
    assert float(restored.encoder.rms.count) > 1.0
    saved_opt = policy.optimizers["main"].state_dict()["state"]
    loaded_opt = restored.optimizers["main"].state_dict()["state"]
    assert torch.equal(saved_opt[0]["exp_avg"], loaded_opt[0]["exp_avg"])
    # training continues identically from the restored state
    torch.manual_seed(3)
    policy.update_dataset(ppo_dataset(seed=2))
    policy.train()
    torch.manual_seed(3)
    restored.update_dataset(ppo_dataset(seed=2))
    restored.train()
    assert restored.weights_checksum() == policy.weights_checksum()


def test_checkpoint_errors(tmp_path):
    policy = make_ppo()
    with pytest.raises(FileNotFoundError, match="does not exist"):
        policy.load_checkpoint(tmp_path / "missing.pt")
    echo = EchoPolicy(PolicyConfig())
    echo.setup(DISCRETE_META)
    path = echo.save_checkpoint(tmp_path / "echo.pt")
    before = policy.weights_checksum()
    with pytest.raises(KeyError, match=r"checkpoint of 'EchoPolicy' does not fit PPOPolicy: missing modules"):
        policy.load_checkpoint(path)
    assert policy.weights_checksum() == before
    with pytest.raises(ValueError, match="not an rlightning policy checkpoint"):
        policy.load_checkpoint_state({"weights": 1})


def test_config_checkpoint_is_loaded_at_setup(tmp_path):
    policy = make_ppo()
    policy.set_weight_version(4)
    path = policy.save_checkpoint(tmp_path / "p.pt")
    loaded = make_ppo(checkpoint=path)
    assert loaded.weights_checksum() == policy.weights_checksum()
    assert loaded.weight_version == 4


def test_device_is_cpu_without_a_gpu_and_stats_are_plain():
    policy = make_ppo()
    assert policy.setup_resources(num_cpus=1, num_gpus=0) == "cpu"
    assert torch.get_num_threads() == 1
    stats = policy.stats()
    assert stats["device"] == "cpu" and stats["role"] == "train" and stats["num_parameters"] > 0
    assert all(isinstance(v, (int, float, str, bool, dict, type(None))) for v in stats.values())


def test_base_policy_without_compute_actions_or_rollout_step_says_what_to_implement():
    class Bare(BasePolicy):
        def construct_network(self, env_meta):
            self.env_meta = env_meta

    bare = Bare(PolicyConfig())
    bare.construct_network(DISCRETE_META)
    with pytest.raises(NotImplementedError, match="compute_actions.*or rollout_step"):
        bare.rollout_step(env_ret("e"))
    assert Bare.buffer_postprocess_fn(PolicyConfig()) is None
    with pytest.raises(ValueError, match="set_schedule\\(total_iterations=0\\)"):
        bare.set_schedule(0)


@pytest.mark.ray
def test_async_rollout_step_in_a_ray_actor(ray_runtime, remote_flags):
    from rlightning.policy.builder import build_policy_group
    from rlightning.utils.config import ClusterConfig
    from tests.support.policy_data import env_batch

    remote_flags(REMOTE_TRAIN=False, REMOTE_EVAL=True)
    cluster = ClusterConfig(eval_worker_num=1, eval_each_cpu_num=0.5)
    group = build_policy_group(AsyncEchoPolicy, PolicyConfig(rollout_mode="async"), cluster)
    try:
        group.construct_network(DISCRETE_META)
        out = group.rollout_batch(env_batch(3))
        assert [r.env_id for r in out.values()] == ["Toy-0", "Toy-1", "Toy-2"]
        assert all(r.action.shape == (3,) for r in out.values())
    finally:
        group.shutdown()


def test_checkpoint_of_the_same_policy_from_another_version_says_so(tmp_path):
    policy = make_ppo()
    state = policy.checkpoint_state()
    del state["modules"]["critic"]  # as a checkpoint written before a module was added looks
    before = policy.weights_checksum()
    with pytest.raises(KeyError, match=r"missing modules \['critic'\].*written by another version of rlightning"):
        policy.load_checkpoint_state(state)
    assert policy.weights_checksum() == before
