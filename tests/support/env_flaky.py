"""A gymnasium env that raises, for the env-error tests (importable by Ray workers).

``FlakyEnv``: episodes of exactly ``episode_length`` steps, observation
``[t, u]`` (the step in the episode and a number drawn at reset, so the steps
of one episode can be told from those of another), reward 1 per step. Every
instance raises ``RuntimeError`` on its ``fail_every``-th ``step`` call (0:
never), and its ``reset`` raises while fewer than ``fail_resets`` resets have
raised in the run. Each raise appends a line to ``log_path``: the tests count
raises over processes (Ray actors) from that file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np


def count_lines(path: Any, prefix: str = "") -> int:
    """Lines of ``path`` that start with ``prefix`` (0 when the file does not exist)."""
    path = Path(path)
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.startswith(prefix))


class FlakyEnv(gym.Env):
    """Fixed-length episodes; raises in ``step`` every ``fail_every`` calls and in the first ``fail_resets`` resets."""

    metadata = {"render_modes": []}

    def __init__(
        self, episode_length: int = 5, fail_every: int = 0, fail_resets: int = 0, log_path: Optional[str] = None
    ) -> None:
        self.episode_length = int(episode_length)
        self.fail_every = int(fail_every)
        self.fail_resets = int(fail_resets)
        self.log_path = log_path
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._calls = 0
        self._t = 0
        self._u = 0.0

    def _log(self, what: str) -> None:
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(f"{what} {os.getpid()}\n")

    def _obs(self) -> np.ndarray:
        return np.array([self._t, self._u], dtype=np.float32)

    def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None):
        super().reset(seed=seed)
        if self.log_path is not None and count_lines(self.log_path, "reset") < self.fail_resets:
            self._log("reset")
            raise RuntimeError("simulator failed to reset")
        self._t = 0
        self._u = float(self.np_random.random())
        return self._obs(), {}

    def step(self, action: Any):
        self._calls += 1
        if self.fail_every and self._calls % self.fail_every == 0:
            self._log("step")
            raise RuntimeError(f"simulator crashed at step call {self._calls}")
        self._t += 1
        terminated = self._t >= self.episode_length
        return self._obs(), 1.0, terminated, False, {}


gym.register(id="Flaky-v0", entry_point=FlakyEnv)
