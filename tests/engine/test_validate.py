import pytest

from rlightning.utils.config import apply_overrides, load_preset
from rlightning.utils.validate import validate_config


def test_presets_validate():
    for name in ("cartpole_ppo", "cartpole_ppo_fast", "pendulum_sac", "pendulum_sac_async"):
        validate_config(load_preset(name))


def test_unknown_engine_lists_registered():
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["engine=sync"])
    names = "Registered engine names: asyncrl, eval, offline, syncrl"
    with pytest.raises(KeyError, match=r"unknown engine 'sync'.*" + names):
        validate_config(cfg)


def test_unknown_policy_lists_registered():
    # The policy type selects the policy config's class, so an unknown one is refused when the config is built.
    with pytest.raises(KeyError, match=r"unknown policy 'ppo2'.*Registered policy names: .*ppo"):
        apply_overrides(load_preset("cartpole_ppo"), ["policy.type=ppo2"])


def test_continuous_policy_on_discrete_env():
    cfg = apply_overrides(load_preset("pendulum_sac"), ["env.name=CartPole-v1"])
    with pytest.raises(
        ValueError, match=r"policy 'sac' supports continuous actions, but env 'CartPole-v1' has a discrete"
    ):
        validate_config(cfg)


def test_batch_larger_than_rollout():
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["buffer.sampler=batch", "train.batch_size=100000"])
    with pytest.raises(ValueError, match=r"train.batch_size=100000 is larger than one rollout \(128 steps x 8 envs"):
        validate_config(cfg)


def test_batch_larger_than_replay_capacity():
    cfg = apply_overrides(load_preset("pendulum_sac"), ["buffer.capacity=100", "train.batch_size=256"])
    with pytest.raises(ValueError, match="train.batch_size=256 is larger than the buffer capacity 100"):
        validate_config(cfg)


def test_async_engine_needs_replay_buffer_or_a_lag_correcting_policy():
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["engine=asyncrl"])
    with pytest.raises(ValueError, match="engine 'asyncrl' with buffer.type 'rollout' .* 'ppo' does not correct"):
        validate_config(cfg)


def test_inference_in_env_workers_needs_the_sync_engine():
    cfg = apply_overrides(load_preset("pendulum_sac_async"), ["cluster.inference=env_workers"])
    with pytest.raises(
        ValueError,
        match=r"engine 'asyncrl' steps the envs one step at a time and needs cluster.inference='eval_workers'",
    ):
        validate_config(cfg)
    with pytest.raises(ValueError, match=r"cluster.inference: Input should be 'eval_workers' or 'env_workers'"):
        apply_overrides(load_preset("cartpole_ppo"), ["cluster.inference=driver"])


def test_uneven_train_workers_and_shards():
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["cluster.train_worker_num=3", "cluster.buffer_worker_num=2"])
    with pytest.raises(ValueError, match="train_worker_num=3 and buffer_worker_num=2 cannot be split evenly"):
        validate_config(cfg)


def test_no_actor_starts_before_a_bad_config_fails(tmp_path):
    import ray

    from rlightning.utils.builders import build_run

    cfg = apply_overrides(load_preset("pendulum_sac"), ["env.name=CartPole-v1", "cluster.remote_env=true"])
    with pytest.raises(ValueError, match="supports continuous actions"):
        build_run(cfg)
    if ray.is_initialized():
        from tests.support.cluster import alive_actor_classes

        assert not [c for c in alive_actor_classes() if "Env" in c]
