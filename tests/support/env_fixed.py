"""Gymnasium envs with known episodes, for the env tests (importable by Ray workers).

``FixedLengthEnv``: every episode terminates after ``episode_length`` steps.
The observation is ``[t, u]``: the step in the episode and a number drawn from
the env's RNG at reset (so seeding is visible). The reward for action ``a`` is
``a + 1``, so a stored reward tells which action produced it.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np


class FixedLengthEnv(gym.Env):
    """Episodes of exactly ``episode_length`` steps; observation ``[t, u]``; reward ``action + 1``."""

    metadata = {"render_modes": []}

    def __init__(self, episode_length: int = 3) -> None:
        self.episode_length = int(episode_length)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(3)
        self._t = 0
        self._u = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self._t, self._u], dtype=np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        self._t = 0
        self._u = float(self.np_random.random())
        return self._obs(), {}

    def step(self, action: Any):
        self._t += 1
        terminated = self._t >= self.episode_length
        return self._obs(), float(action) + 1.0, terminated, False, {}


gym.register(id="FixedLength-v0", entry_point=FixedLengthEnv)
