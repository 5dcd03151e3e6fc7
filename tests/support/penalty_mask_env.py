"""`PenaltyMaskEnv`: a masked action ends the episode with a large penalty.

Each step half of the ``n`` actions are allowed (at random); the lowest allowed one earns 1, another allowed
one 0.2, a disallowed one -10 and ends the episode. The observation shows which actions are allowed (as
floats, so a learner without the mask can learn to avoid them); ``expose_mask=True`` also gives the mask
under ``action_mask``, which a masking learner honours. Episodes last 16 steps otherwise.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class PenaltyMaskEnv(gym.Env):
    def __init__(self, n: int = 6, expose_mask: bool = True, length: int = 16):
        self.n, self.expose_mask, self.length = n, expose_mask, length
        entries = {"observation": spaces.Box(0.0, 1.0, (n,), np.float32)}
        if expose_mask:
            entries["action_mask"] = spaces.MultiBinary(n)
        self.observation_space = spaces.Dict(entries)
        self.action_space = spaces.Discrete(n)
        self.masked_taken = 0

    def _obs(self):
        self.mask = np.zeros(self.n, np.int8)
        self.mask[self.np_random.choice(self.n, self.n // 2, replace=False)] = 1
        obs = {"observation": self.mask.astype(np.float32)}
        if self.expose_mask:
            obs["action_mask"] = self.mask.copy()
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        self.t += 1
        if not self.mask[action]:
            self.masked_taken += 1
            return self._obs(), -10.0, True, False, {}
        reward = 1.0 if action == int(np.flatnonzero(self.mask)[0]) else 0.2
        return self._obs(), reward, False, self.t >= self.length, {}
