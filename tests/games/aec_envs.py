"""A small AEC game without action masks (the turn-based backend refuses it) and a parallel-only env module."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from tests.support.pz_envs import early_exit  # noqa: F401 - a parallel env, for the backend-mismatch error


class NoMaskGame(AECEnv):
    """Two players alternately say 0 or 1; the game ends after 4 moves. Observations carry no mask."""

    metadata = {"name": "no_mask_v0"}

    def __init__(self) -> None:
        self.possible_agents = ["a", "b"]

    def observation_space(self, agent):
        return spaces.Box(0.0, 1.0, (1,), dtype=np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.rewards = {a: 0.0 for a in self.agents}
        self._cumulative_rewards = dict(self.rewards)
        self.terminations = {a: False for a in self.agents}
        self.truncations = {a: False for a in self.agents}
        self.infos = {a: {} for a in self.agents}
        self.agent_selection = "a"
        self.moves = 0

    def observe(self, agent):
        return np.zeros(1, dtype=np.float32)

    def step(self, action):
        self.moves += 1
        self.agent_selection = "b" if self.agent_selection == "a" else "a"
        if self.moves >= 4:
            self.terminations = {a: True for a in self.agents}


def no_mask():
    """A `NoMaskGame`."""
    return NoMaskGame()
