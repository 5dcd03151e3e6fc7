"""env.wrappers: names resolved when the config is built, applied to every sub-env inside the worker."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from pydantic import ValidationError

from rlightning.env.gym_env import GymnasiumEnv
from rlightning.env.wrappers import WRAPPERS, resolve_wrappers
from rlightning.utils.config import EnvConfig, MainConfig


def test_short_names_gymnasium_class_names_and_entry_points_resolve():
    specs = resolve_wrappers(
        [
            "flatten",
            {"name": "frame_stack", "kwargs": {"stack_size": 3}},
            "TimeLimit",
            {"name": "gymnasium.wrappers:ClipReward", "kwargs": {"min_reward": -1.0, "max_reward": 1.0}},
        ]
    )
    assert [s.cls for s in specs] == [
        gym.wrappers.FlattenObservation,
        gym.wrappers.FrameStackObservation,
        gym.wrappers.TimeLimit,
        gym.wrappers.ClipReward,
    ]
    assert specs[1].kwargs == {"stack_size": 3}
    for name in WRAPPERS:  # every short name stands for a real wrapper (gymnasium's, or rlightning's own)
        assert issubclass(resolve_wrappers([name])[0].cls, gym.Wrapper), name


@pytest.mark.parametrize(
    "entry, error, match",
    [
        ("frame_stak", KeyError, r"unknown env wrapper 'frame_stak'; closest: 'frame_stack'"),
        ({"name": "frame_stack", "kwargs": {"stack": 4}}, KeyError, r"no argument 'stack' \(closest: 'stack_size'\)"),
        ("nosuchmodule:Wrap", KeyError, r"module 'nosuchmodule' cannot be imported"),
        (3, TypeError, r"env.wrappers\[0\] must be a wrapper name or"),
        ({"name": "resize", "args": [84]}, TypeError, r"env.wrappers\[0\] has keys \['args'\]"),
        ({"name": "resize", "kwargs": [84, 84]}, TypeError, r"kwargs must be a mapping"),
    ],
)
def test_bad_entries_name_what_is_wrong(entry, error, match):
    with pytest.raises(error, match=match):
        resolve_wrappers([entry])


def test_an_unknown_wrapper_fails_when_the_config_is_built():
    with pytest.raises(ValidationError, match="unknown env wrapper 'grayscal'; closest: 'grayscale'"):
        MainConfig(env={"name": "CartPole-v1", "wrappers": ["grayscal"]})


@pytest.mark.parametrize("num_envs", [1, 3])
def test_wrappers_wrap_every_sub_env(num_envs):
    cfg = EnvConfig(num_envs=num_envs, wrappers=[{"name": "frame_stack", "kwargs": {"stack_size": 4}}])
    env = GymnasiumEnv(cfg)
    assert env.single_observation_space.shape == (4, 4)
    assert env.vectorization_mode == (
        "single" if num_envs == 1 else "sync"
    )  # CartPole's own vector env has no sub-envs
    ret = env.reset(seed=0)
    assert ret.observation.shape == (num_envs, 4, 4)
    # a fresh frame stack holds the reset observation in every slot (gymnasium's padding_type="reset")
    assert np.all(ret.observation == ret.observation[:, 3:4]) and np.any(ret.observation != 0)
    env.close()


def test_vector_entry_point_cannot_take_wrappers():
    cfg = EnvConfig(num_envs=2, vectorization_mode="vector_entry_point", wrappers=["flatten"])
    with pytest.raises(ValueError, match="wrap each sub-env"):
        GymnasiumEnv(cfg)


def _play(env, steps, seed=0):
    """Step ``env`` with its action space's samples; the transformed rewards and the finished episodes' returns."""
    env.reset(seed=seed)
    env.single_action_space.seed(seed)
    rewards, returns = [], []
    from rlightning.types import PolicyResponse

    for _ in range(steps):
        action = np.stack([env.single_action_space.sample() for _ in range(env.num_envs)])
        ret = env.step(PolicyResponse(env_id=env.env_id, action=action))
        rewards.append(ret.last_reward.copy())
        done = ret.last_terminated | ret.last_truncated
        returns += [float(r) for r in ret.info["episode_return"][done]]
    return np.stack(rewards), returns


@pytest.mark.parametrize("num_envs", [1, 2])
def test_episode_returns_count_the_env_reward_before_normalize_and_clip(num_envs):
    """normalize_reward and clip_reward change what the learner gets, not the episode returns reported."""
    plain = GymnasiumEnv(EnvConfig(name="Pendulum-v1", num_envs=num_envs))
    wrapped = GymnasiumEnv(
        EnvConfig(
            name="Pendulum-v1",
            num_envs=num_envs,
            wrappers=[
                {"name": "normalize_reward", "kwargs": {"gamma": 0.99}},
                {"name": "clip_reward", "kwargs": {"min_reward": -1.0, "max_reward": 1.0}},
            ],
        )
    )
    raw_rewards, raw_returns = _play(plain, 450)
    rewards, returns = _play(wrapped, 450)
    assert len(returns) == 2 * num_envs  # Pendulum's episodes are 200 steps
    np.testing.assert_allclose(returns, raw_returns, rtol=1e-5)
    assert min(raw_returns) < -200  # the env's own scale: hundreds per episode
    assert rewards.min() >= -1.0 and rewards.max() <= 1.0  # the learner's rewards: normalised, then clipped
    assert not np.allclose(rewards, raw_rewards)
    plain.close()
    wrapped.close()


def test_reward_wrappers_alone_keep_the_envs_own_vector_env():
    cfg = EnvConfig(num_envs=4, wrappers=[{"name": "clip_reward", "kwargs": {"min_reward": 0.0, "max_reward": 0.5}}])
    env = GymnasiumEnv(cfg)
    assert env.vectorization_mode == "vector_entry_point"  # CartPole's own: the reward wrapper runs over it
    rewards, returns = _play(env, 200)
    assert np.all(rewards <= 0.5) and rewards.max() == 0.5
    assert returns and all(r == int(r) and r > 5 for r in returns)  # 1 per step, not the clipped 0.5
    env.close()
