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


class MaskedPairEnv(ParallelEnv):
    """Two agents whose observations are ``{"observation": Box(3), "action_mask": MultiBinary(4)}`` (PettingZoo's
    classic-games convention); a masked action raises, so a path that ignores the mask fails the run."""

    metadata = {"name": "masked_pair_v0"}

    def __init__(self, length: int = 6) -> None:
        self.possible_agents = ["first", "second"]
        self.agents = []
        self.length = length
        self.rng = np.random.default_rng(0)

    def observation_space(self, agent):
        return spaces.Dict(
            {"observation": spaces.Box(-1.0, 1.0, (3,), np.float32), "action_mask": spaces.MultiBinary(4)}
        )

    def action_space(self, agent):
        return spaces.Discrete(4)

    def _obs(self):
        self.masks = {}
        out = {}
        for a in self.agents:
            mask = np.zeros(4, np.int8)
            mask[self.rng.choice(4, 2, replace=False)] = 1
            self.masks[a] = mask
            out[a] = {"observation": self.rng.uniform(-1, 1, 3).astype(np.float32), "action_mask": mask}
        return out

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.t = 0
        return self._obs(), {a: {} for a in self.agents}

    def step(self, actions):
        for a in self.agents:
            if not self.masks[a][int(actions[a])]:
                raise ValueError(f"agent {a} took masked action {actions[a]} (mask {self.masks[a]})")
        self.t += 1
        rew = {a: float(int(actions[a]) == int(np.flatnonzero(self.masks[a])[0])) for a in self.agents}
        done = self.t >= self.length
        term = {a: False for a in self.agents}
        trunc = {a: done for a in self.agents}
        obs = self._obs()
        if done:
            self.agents = []
        return obs, rew, term, trunc, {a: {} for a in term}


def masked_pair(**kwargs):
    """A `MaskedPairEnv`."""
    return MaskedPairEnv(**kwargs)
