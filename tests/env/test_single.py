"""Tests of rlightning/env/utils/single.py: one env as a NEXT_STEP vector env."""

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode

from rlightning.env.utils.single import SingleEnvVector


def _run(env, actions):
    out = [env.reset(seed=7)[0]]
    for a in actions:
        obs, reward, term, trunc, _ = env.step(a)
        out.append((obs.copy(), reward.copy(), term.copy(), trunc.copy()))
    return out


def test_same_trajectory_as_sync_vector_env_across_episode_boundaries():
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 2, size=1) for _ in range(120)]
    ours = _run(SingleEnvVector(gym.make("CartPole-v1")), actions)
    ref = _run(
        gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")], autoreset_mode=AutoresetMode.NEXT_STEP), actions
    )
    np.testing.assert_array_equal(ours[0], ref[0])
    done_steps = 0
    for a, b in zip(ours[1:], ref[1:]):
        for x, y in zip(a, b):
            np.testing.assert_array_equal(x, y)
        done_steps += int(a[2][0] or a[3][0])
    assert done_steps >= 2  # the comparison crossed episode boundaries


def test_batched_shapes_and_autoreset_metadata():
    env = SingleEnvVector(gym.make("CartPole-v1"))
    obs, info = env.reset(seed=0)
    assert obs.shape == (1, 4) and obs.dtype == np.float32 and info == {}
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert env.single_action_space == gym.spaces.Discrete(2)
    obs, reward, term, trunc, _ = env.step(np.array([1]))
    assert obs.shape == (1, 4) and reward.shape == (1,) and term.dtype == bool and trunc.shape == (1,)
    env.close()


def test_returned_observation_is_not_overwritten_by_later_steps():
    env = SingleEnvVector(gym.make("CartPole-v1"))
    first, _ = env.reset(seed=0)
    kept = first.copy()
    env.step(np.array([1]))
    np.testing.assert_array_equal(first, kept)
