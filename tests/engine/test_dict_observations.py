"""Dict and Tuple observations end to end: env worker -> record (nested keys) -> buffer -> PPO / DQN / SAC."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlightning.utils.config import config_from_dict

LOCAL = {"remote_env": False, "remote_eval": False, "remote_train": False, "remote_storage": False}


class DictGridEnv(gym.Env):
    """A tiny task with a Dict observation: an image of the agent's cell, its position and a mode flag."""

    def __init__(self, tuple_obs: bool = False, continuous: bool = False):
        image = spaces.Box(0, 255, (6, 6, 1), np.uint8)
        pos = spaces.Box(0.0, 1.0, (2,), np.float32)
        mode = spaces.Discrete(2)
        self.tuple_obs = tuple_obs
        if tuple_obs:
            self.observation_space = spaces.Tuple((image, pos, mode))
        else:
            self.observation_space = spaces.Dict({"image": image, "pos": pos, "mode": mode})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32) if continuous else spaces.Discrete(4)
        self.t = 0

    def _obs(self):
        image = np.zeros((6, 6, 1), np.uint8)
        image[self.t % 6, 0, 0] = 255
        pos = np.array([self.t / 10.0, 0.5], np.float32)
        mode = self.t % 2
        return (image, pos, mode) if self.tuple_obs else {"image": image, "pos": pos, "mode": mode}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        reward = float(np.sum(action)) if np.ndim(action) else float(action == 1)
        return self._obs(), reward, False, self.t >= 10, {}


def _config(tmp_path, policy: dict, buffer: dict, train: dict, env_kwargs: dict):
    return config_from_dict(
        {
            "env": {"name": "tests.engine.test_dict_observations:DictGridEnv", "num_envs": 2, "env_kwargs": env_kwargs},
            "policy": {"hidden_sizes": [16], "cnn": "minatar", **policy},
            "buffer": buffer,
            "train": {"iterations": 2, "rollout_steps": 16, **train},
            "cluster": {**LOCAL, "inference": "env_workers"},
            "log": {"progress": False, "run_dir": str(tmp_path)},
        }
    )


@pytest.mark.parametrize("tuple_obs", [False, True], ids=["dict", "tuple"])
def test_ppo_trains_on_dict_and_tuple_observations_through_the_buffer(tmp_path, build, tuple_obs):
    cfg = _config(
        tmp_path,
        {"type": "ppo", "num_minibatches": 2, "norm_obs": True},
        {"type": "rollout", "capacity": 32, "sampler": "all"},
        {},
        {"tuple_obs": tuple_obs},
    )
    e = build(cfg).engine
    metrics = e.step()
    assert np.isfinite(metrics["policy_loss"]), metrics
    e.step()
    assert e.env_steps == 64


@pytest.mark.parametrize(
    "policy, continuous",
    [({"type": "dqn", "epsilon_decay_steps": 100}, False), ({"type": "sac"}, True)],
    ids=["dqn", "sac"],
)
def test_off_policy_learners_sample_nested_next_observations(tmp_path, build, policy, continuous):
    cfg = _config(
        tmp_path,
        policy,
        {"type": "replay", "capacity": 256, "sampler": "uniform"},
        {"batch_size": 16, "learning_starts": 16},
        {"continuous": continuous},
    )
    e = build(cfg).engine
    e.step()
    metrics = e.step()
    assert "q_loss" in metrics or "loss" in metrics, metrics
