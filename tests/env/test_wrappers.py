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
    with pytest.raises(ValueError, match="env.wrappers wrap each sub-env"):
        GymnasiumEnv(cfg)
