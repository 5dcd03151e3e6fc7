"""Small PettingZoo parallel envs for the pettingzoo backend's tests (``tests.support.pz_envs:early_exit``)."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces
from pettingzoo import ParallelEnv


class EarlyExitEnv(ParallelEnv):
    """Two agents; ``quitter`` terminates after ``quit_at`` steps, ``stayer`` after ``stay_for`` steps.

    Each step every agent in the episode gets reward 1.0 and observes ``[t, agent index]``.
    """

    metadata = {"name": "early_exit_v0"}

    def __init__(self, quit_at: int = 2, stay_for: int = 4) -> None:
        self.possible_agents = ["stayer", "quitter"]
        self.agents = []
        self.quit_at = quit_at
        self.stay_for = stay_for
        self.t = 0

    def observation_space(self, agent):
        return spaces.Box(0.0, 100.0, (2,), dtype=np.float32)

    def action_space(self, agent):
        return spaces.Discrete(2)

    def _obs(self):
        return {a: np.array([self.t, self.possible_agents.index(a)], dtype=np.float32) for a in self.agents}

    def reset(self, seed=None, options=None):
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for {missing}")
        self.t += 1
        obs = self._obs()
        rew = {a: 1.0 for a in self.agents}
        term = {a: (a == "quitter" and self.t >= self.quit_at) or self.t >= self.stay_for for a in self.agents}
        trunc = {a: False for a in self.agents}
        self.agents = [a for a in self.agents if not term[a]]
        return obs, rew, term, trunc, {a: {} for a in term}


def early_exit(**kwargs):
    """An `EarlyExitEnv` (the backend's ``module:callable`` form)."""
    return EarlyExitEnv(**kwargs)
