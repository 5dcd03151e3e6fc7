"""A cheap env with an action mask for throughput figures: masked PPO against the same env without the mask key.

``MaskedChoice`` observes ``{"observation": Box(0, 1, (n,)), "action_mask": MultiBinary(n)}`` (PettingZoo's
convention, which rlightning's policies honour); ``expose_mask=False`` gives the same env without the
``action_mask`` key (a Dict of one entry), so the two differ only by the mask. Each step a random half of the
``n`` actions is allowed; the observation shows them as floats. The lowest allowed action earns 1, another
allowed one 0, a disallowed one -1 (the episode goes on either way, so a masked and an unmasked learner step
the same number of episodes). Episodes last ``length`` steps. Configs name it by its entry point,
``benchmarks.mask_env:MaskedChoice`` (Ray workers import it from the repository root).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENTRY_POINT = "benchmarks.mask_env:MaskedChoice"


class MaskedChoice(gym.Env):
    """``n`` discrete actions, half of them allowed each step; the mask under ``action_mask`` if exposed."""

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, n: int = 8, expose_mask: bool = True, length: int = 200) -> None:
        self.n, self.expose_mask, self.length = int(n), bool(expose_mask), int(length)
        entries: Dict[str, spaces.Space] = {"observation": spaces.Box(0.0, 1.0, (self.n,), np.float32)}
        if self.expose_mask:
            entries["action_mask"] = spaces.MultiBinary(self.n)
        self.observation_space = spaces.Dict(entries)
        self.action_space = spaces.Discrete(self.n)
        self._mask = np.zeros(self.n, np.int8)
        self._best = 0
        self._t = 0

    def _obs(self) -> Dict[str, np.ndarray]:
        self._mask[:] = 0
        allowed = self.np_random.permutation(self.n)[: self.n // 2]
        self._mask[allowed] = 1
        self._best = int(allowed.min())  # the reward's target, found here so a step costs the same whatever is taken
        obs = {"observation": self._mask.astype(np.float32)}
        if self.expose_mask:
            obs["action_mask"] = self._mask.copy()
        return obs

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        self._t = 0
        return self._obs(), {}

    def step(self, action):
        a = int(action)
        self._t += 1
        reward = (1.0 if a == self._best else 0.0) if self._mask[a] else -1.0
        return self._obs(), reward, False, self._t >= self.length, {}
