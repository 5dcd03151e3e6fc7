"""A gymnasium env that raises, for the env-error tests (importable by Ray workers).

``FlakyEnv``: episodes of exactly ``episode_length`` steps, observation
``[t, u]`` (the step in the episode and a number drawn at reset, so the steps
of one episode can be told from those of another), reward 1 per step. Every
instance raises ``RuntimeError`` on its ``fail_every``-th ``step`` call (0:
never), and its ``reset`` raises while fewer than ``fail_resets`` resets have
raised in the run. Each raise appends a line to ``log_path``: the tests count
raises over processes (Ray actors) from that file. With ``hang_at``, the
``hang_at``-th ``step`` call sleeps for good, once per ``log_path`` (a hung
simulator; the line ``hang`` is logged first).

``FlakyCartPole`` (``FlakyCartPole-v0``, 500-step limit): CartPole whose
instances raise every ``fail_every`` step calls, ``max_raises`` times in all.

``FlakyCounterEnv`` (``ENVS["flaky_counter"]``): a `BaseEnv` that raises every
few steps and, unlike the gymnasium backend, cannot rebuild its env in place.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Dict, Optional

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleEnv

from rlightning.env import BaseEnv
from rlightning.types import EnvMeta, EnvRet
from rlightning.utils.config import EnvConfig
from rlightning.utils.registry import ENVS


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
        self,
        episode_length: int = 5,
        fail_every: int = 0,
        fail_resets: int = 0,
        log_path: Optional[str] = None,
        hang_at: int = 0,
    ) -> None:
        self.episode_length = int(episode_length)
        self.fail_every = int(fail_every)
        self.fail_resets = int(fail_resets)
        self.log_path = log_path
        self.hang_at = int(hang_at)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shape=(2,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._calls = 0
        self._t = 0
        self._u = 0.0

    def _log(self, what: str) -> None:
        if self.log_path is not None:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(f"{what} {os.getpid()}\n")

    def _first_to_hang(self) -> bool:
        """True for one instance over all processes (the marker file is created exclusively)."""
        try:
            os.close(os.open(f"{self.log_path}.hang", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

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
        if self.hang_at and self._calls == self.hang_at and self._first_to_hang():
            self._log("hang")
            while True:
                time.sleep(60)
        if self.fail_every and self._calls % self.fail_every == 0:
            self._log("step")
            raise RuntimeError(f"simulator crashed at step call {self._calls}")
        self._t += 1
        terminated = self._t >= self.episode_length
        return self._obs(), 1.0, terminated, False, {}


gym.register(id="Flaky-v0", entry_point=FlakyEnv)


class FlakyCartPole(CartPoleEnv):
    """CartPole whose instance raises ``RuntimeError`` on its ``fail_every``-th ``step`` call since it was made (a
    recreated env starts counting again), until ``max_raises`` raises are logged in ``log_path`` over the run."""

    def __init__(self, fail_every: int = 0, max_raises: int = 0, log_path: Optional[str] = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.fail_every, self.max_raises, self.log_path = int(fail_every), int(max_raises), log_path
        self._calls = 0

    def step(self, action: Any):
        self._calls += 1
        if self.fail_every and self._calls % self.fail_every == 0 and count_lines(self.log_path) < self.max_raises:
            with open(self.log_path, "a", encoding="utf-8") as f:
                f.write(f"step {os.getpid()}\n")
            raise RuntimeError(f"simulator crashed at step call {self._calls}")
        return super().step(action)


gym.register(id="FlakyCartPole-v0", entry_point=FlakyCartPole, max_episode_steps=500)


@ENVS.register("flaky_counter", override=True)
class FlakyCounterEnv(BaseEnv):
    """A `BaseEnv` without ``recreate_env`` (an env error makes the group build a new worker).

    Observation: each row's step count since the reset; reward 1; episodes never end. ``step`` raises
    ``RuntimeError`` on every ``env_kwargs["fail_every"]``-th call of this worker (0: never).
    """

    def __init__(self, config: EnvConfig, worker_index: int = 0, preprocess_fn: Any = None) -> None:
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        self.fail_every = int(config.env_kwargs.get("fail_every", 0))
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, np.inf, (1,), dtype=np.float32)
        self.t = np.zeros(self.num_envs, dtype=np.float32)
        self.calls = 0

    def _ret(self, reward: np.ndarray) -> EnvRet:
        flags = np.zeros(self.num_envs, dtype=bool)
        ep_return, ep_length = self.episodes.update(reward, flags)
        info = {"episode_return": ep_return, "episode_length": ep_length}
        return EnvRet(self.env_id, self.t[:, None].copy(), reward, flags, flags.copy(), info)

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> EnvRet:
        self.t[:] = 0
        ep_return, ep_length = self.episodes.reset()
        zeros = np.zeros(self.num_envs, dtype=bool)
        info = {"episode_return": ep_return, "episode_length": ep_length}
        return EnvRet(self.env_id, self.t[:, None].copy(), np.zeros(self.num_envs, np.float32), zeros, zeros, info)

    def step(self, policy_resp: Any) -> EnvRet:
        self.check_policy_resp(policy_resp)
        self.calls += 1
        if self.fail_every and self.calls % self.fail_every == 0:
            raise RuntimeError(f"counter crashed at step call {self.calls}")
        self.t += 1
        return self._ret(np.ones(self.num_envs, dtype=np.float32))

    def get_metadata(self) -> EnvMeta:
        return EnvMeta(self.env_id, self.action_space, self.observation_space, self.num_envs)
