"""Tests of rlightning/env/gym_env.py: the gymnasium backend."""

import gymnasium as gym
import numpy as np
import pytest

import tests.support.env_fixed  # noqa: F401 - registers FixedLength-v0
from rlightning.env import GymnasiumEnv, resolve_env_spec
from rlightning.types import EnvMeta, PolicyResponse
from rlightning.utils.config import EnvConfig


def _env(name="CartPole-v1", index=0, **cfg):
    return GymnasiumEnv(EnvConfig(name=name, **cfg), worker_index=index)


def _act(env, action):
    return PolicyResponse(env.env_id, action=np.asarray(action))


@pytest.mark.parametrize("num_envs, mode", [(1, "single"), (4, "vector_entry_point")])
def test_env_ret_follows_contract_1(num_envs, mode):
    env = _env(num_envs=num_envs)
    assert env.vectorization_mode == mode
    ret = env.reset(seed=0)
    assert ret.env_id == "CartPole-v1-0"
    assert ret.observation.shape == (num_envs, 4) and ret.observation.dtype == np.float32
    assert ret.last_reward.dtype == np.float32 and ret.last_reward.shape == (num_envs,)
    assert ret.last_terminated.dtype == bool and ret.last_truncated.shape == (num_envs,)
    assert ret.info["episode_return"].tolist() == [0.0] * num_envs
    ret = env.step(_act(env, np.ones(num_envs, dtype=np.int64)))
    assert ret.observation.shape == (num_envs, 4) and ret.last_reward.tolist() == [1.0] * num_envs
    assert ret.info["episode_return"].tolist() == [1.0] * num_envs
    assert ret.info["episode_length"].tolist() == [1] * num_envs
    meta = env.get_metadata()
    assert isinstance(meta, EnvMeta) and meta.num_envs == num_envs
    assert meta.action_space == gym.spaces.Discrete(2) and meta.observation_space.shape == (4,)
    env.close()


@pytest.mark.parametrize("mode", ["sync", "auto"])
def test_autoreset_boundary_next_step(mode):
    env = _env("FixedLength-v0", num_envs=2, env_kwargs={"episode_length": 2}, vectorization_mode=mode)
    env.reset(seed=0)
    r1 = env.step(_act(env, [0, 1]))
    assert r1.observation[:, 0].tolist() == [1.0, 1.0] and r1.last_reward.tolist() == [1.0, 2.0]
    assert not r1.last_terminated.any()
    r2 = env.step(_act(env, [2, 2]))
    # Done rows carry the FINAL observation (t = 2) and the episode's totals.
    assert r2.observation[:, 0].tolist() == [2.0, 2.0] and r2.last_terminated.tolist() == [True, True]
    assert r2.info["episode_return"].tolist() == [4.0, 5.0] and r2.info["episode_length"].tolist() == [2, 2]
    # Next step: the action is ignored, the reset observation comes back with reward 0 and done False.
    r3 = env.step(_act(env, [1, 1]))
    assert r3.observation[:, 0].tolist() == [0.0, 0.0] and r3.last_reward.tolist() == [0.0, 0.0]
    assert not (r3.last_terminated | r3.last_truncated).any()
    assert r3.info["episode_return"].tolist() == [0.0, 0.0] and r3.info["episode_length"].tolist() == [0, 0]
    assert r3.observation[0, 1] != r2.observation[0, 1]  # a new episode drew a new u
    r4 = env.step(_act(env, [1, 0]))
    assert r4.last_reward.tolist() == [2.0, 1.0] and r4.info["episode_length"].tolist() == [1, 1]
    assert env.episodes.episodes == 2


def test_max_episode_steps_truncates():
    env = _env("FixedLength-v0", num_envs=2, env_kwargs={"episode_length": 100}, max_episode_steps=3)
    env.reset(seed=0)
    rets = [env.step(_act(env, [0, 0])) for _ in range(3)]
    assert rets[-1].last_truncated.tolist() == [True, True] and not rets[-1].last_terminated.any()
    assert not rets[1].last_truncated.any()
    cart = _env(num_envs=3, max_episode_steps=5)
    cart.reset(seed=0)
    for _ in range(5):
        ret = cart.step(_act(cart, [0, 1, 0]))
    assert (ret.last_truncated | ret.last_terminated).all()


def test_seeding_is_reproducible_and_distinct_per_sub_env():
    a = _env("FixedLength-v0", num_envs=3, vectorization_mode="sync").reset(seed=11).observation[:, 1]
    b = _env("FixedLength-v0", num_envs=3, vectorization_mode="sync").reset(seed=11).observation[:, 1]
    c = _env("FixedLength-v0", num_envs=3, vectorization_mode="sync").reset(seed=12).observation[:, 1]
    np.testing.assert_array_equal(a, b)
    assert len(set(a.tolist())) == 3
    assert a[1] == c[0] and a[2] == c[1]  # sub-env j is seeded with seed + j


def test_cartpole_runs_are_reproducible():
    def run():
        env = _env(num_envs=4)
        obs = [env.reset(seed=3).observation]
        for k in range(60):
            obs.append(env.step(_act(env, (np.arange(4) + k) % 2)).observation)
        return np.stack(obs)

    np.testing.assert_array_equal(run(), run())


def test_unknown_env_id_lists_the_closest_names():
    with pytest.raises(KeyError, match=r"unknown env id 'CartPol-v1'\. Closest registered names: 'CartPole-v1'"):
        _env("CartPol-v1")
    with pytest.raises(KeyError, match=r"unknown env id 'rendezvou'.*Closest registered names:.*'rendezvous'"):
        resolve_env_spec("rendezvou")


def test_entry_point_strings():
    env = _env("tests.support.env_fixed:FixedLengthEnv", num_envs=2, env_kwargs={"episode_length": 4})
    assert env.env_id == "tests.support.env_fixed.FixedLengthEnv-0"
    assert env.reset(seed=0).observation.shape == (2, 2)
    assert resolve_env_spec("tests.support.env_fixed:FixedLength-v0").id == "FixedLength-v0"
    with pytest.raises(KeyError, match=r"module 'no_such_module_xyz' cannot be imported"):
        resolve_env_spec("no_such_module_xyz:Env")
    with pytest.raises(KeyError, match=r"module 'tests.support.env_fixed' has no env class or id 'Nope'"):
        resolve_env_spec("tests.support.env_fixed:Nope")


def test_vector_entry_point_mode_needs_one():
    with pytest.raises(ValueError, match=r"'FixedLength-v0' has no vector entry point; use 'auto', 'sync' or 'async'"):
        _env("FixedLength-v0", num_envs=2, vectorization_mode="vector_entry_point")
    assert _env(num_envs=2, vectorization_mode="vector_entry_point").vectorization_mode == "vector_entry_point"


def test_action_outside_the_space_names_env_value_and_space():
    env = _env(num_envs=3, index=2)
    env.reset(seed=0)
    with pytest.raises(
        ValueError, match=r"env CartPole-v1-2: action 2 \(sub-env 1\) is outside the action space Discrete\(2\)"
    ):
        env.step(_act(env, [0, 2, 1]))
    # The env did not step: the next valid step is its first.
    assert env.step(_act(env, [0, 1, 1])).info["episode_length"].tolist() == [1, 1, 1]


def test_box_actions_nan_and_bounds():
    env = _env("Pendulum-v1", num_envs=2, out_of_bounds_action="raise")
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"env Pendulum-v1-0: action \[nan\] \(sub-env 0\) has a NaN"):
        env.step(_act(env, np.array([[np.nan], [0.0]], np.float32)))
    with pytest.raises(ValueError, match=r"outside the bounds of the action space Box\(-2.0, 2.0, \(1,\), float32\)"):
        env.step(_act(env, np.array([[0.0], [2.5]], np.float32)))
    ret = env.step(_act(env, np.array([[0.0], [1.0]], np.float32)))
    assert ret.observation.shape == (2, 3)


def test_step_before_reset_is_an_error():
    env = _env(num_envs=2)
    with pytest.raises(ValueError, match=r"env CartPole-v1-0: step\(\) before reset\(\)"):
        env.step(_act(env, [0, 0]))


def test_custom_preprocess_fn_is_used():
    env = GymnasiumEnv(EnvConfig(num_envs=2), preprocess_fn=lambda resp: resp.logits.argmax(axis=1))
    env.reset(seed=0)
    ret = env.step(PolicyResponse(env.env_id, logits=np.array([[0.0, 1.0], [1.0, 0.0]])))
    assert ret.observation.shape == (2, 4)


def test_reset_rejects_bad_seeds():
    env = _env()
    with pytest.raises(ValueError, match=r"seed must be None or an int >= 0, got -3"):
        env.reset(seed=-3)
