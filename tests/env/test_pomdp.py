"""`MaskVelocityObservation` (``env.wrappers: [mask_velocity]``): partially observed classic control."""

import gymnasium as gym
import numpy as np
import pytest

from rlightning.env.pomdp import MaskVelocityObservation
from rlightning.env.wrappers import resolve_wrappers


def test_mask_velocity_by_short_name_zeros_cartpole_velocities():
    (spec,) = resolve_wrappers(["mask_velocity"])
    assert spec.cls is MaskVelocityObservation
    env = spec.wrap(gym.make("CartPole-v1"))
    obs, _ = env.reset(seed=0)
    for _ in range(5):
        obs, *_ = env.step(env.action_space.sample())
        assert obs[1] == 0 and obs[3] == 0 and obs[0] != 0 and obs[2] != 0
        assert env.observation_space.contains(obs) and obs.dtype == np.float32
    assert env.observation_space.low[1] == env.observation_space.high[1] == 0


def test_mask_velocity_checks_its_env_and_indices():
    with pytest.raises(ValueError, match="does not know the velocities of env 'Acrobot'.*pass indices"):
        MaskVelocityObservation(gym.make("Acrobot-v1"))
    with pytest.raises(ValueError, match="indices \\[7\\] are outside the observation of size 4"):
        MaskVelocityObservation(gym.make("CartPole-v1"), indices=[7])
    env = MaskVelocityObservation(gym.make("Acrobot-v1"), indices=[4, 5])
    obs, _ = env.reset(seed=0)
    assert env.indices == (4, 5) and not obs[4:].any()
    with pytest.raises(KeyError, match="has no argument 'index'"):
        resolve_wrappers([{"name": "mask_velocity", "kwargs": {"index": [1]}}])
