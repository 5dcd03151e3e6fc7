"""A synthetic pixel env for throughput figures: Atari-sized ``uint8`` frames at almost no simulation cost.

``SyntheticPixels`` returns 84x84x4 ``uint8`` observations (the shape of Atari
frames after the standard preprocessing and a 4-frame stack), drawn from a bank
of random frames made at reset, six discrete actions, a reward of 1 for action
0 and 0 otherwise, and episodes that end with probability 1/200 per step (all
from the env's seeded RNG). Stepping costs little, so a benchmark on it
measures what moving and encoding pixels costs a sampler, not an emulator.

Registered with gymnasium as ``rlightning/SyntheticPixels-v0`` by `register`
(Ray workers import this module by its entry point).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np

ENV_ID = "rlightning/SyntheticPixels-v0"
SHAPE = (84, 84, 4)
BANK = 16


class SyntheticPixels(gym.Env):
    """Random 84x84x4 uint8 frames, Discrete(6) actions, geometric episode lengths (mean 200)."""

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, end_prob: float = 1.0 / 200.0) -> None:
        self.observation_space = gym.spaces.Box(0, 255, SHAPE, dtype=np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.end_prob = float(end_prob)
        self._bank: Optional[np.ndarray] = None
        self._t = 0

    def reset(self, *, seed: Optional[int] = None, options: Optional[dict] = None):
        super().reset(seed=seed)
        if self._bank is None or seed is not None:
            self._bank = self.np_random.integers(0, 256, size=(BANK, *SHAPE), dtype=np.uint8)
        self._t = 0
        return self._bank[0].copy(), {}

    def step(self, action):
        self._t += 1
        terminated = bool(self.np_random.random() < self.end_prob)
        return self._bank[self._t % BANK].copy(), float(int(action) == 0), terminated, False, {}


def register() -> str:
    """Register ``SyntheticPixels`` with gymnasium (idempotent); returns its id."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point="benchmarks.pixel_env:SyntheticPixels", max_episode_steps=1000)
    return ENV_ID
