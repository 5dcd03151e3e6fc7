"""A "notebook cell" for the env tests: env classes that worker processes cannot import.

`load_notebook_cell()` runs `NOTEBOOK_CELL` in a fresh module that is not in
``sys.modules``, as a class defined in a Jupyter cell is not importable by a
Ray worker. The cell defines and registers a `BaseEnv` subclass
(``ENVS["notebook_coin"]``) and a gymnasium env (``NotebookWalk-v0``); Ray
must ship both by value.
"""

from __future__ import annotations

import types

NOTEBOOK_CELL = '''
import gymnasium as gym
import numpy as np

from rlightning.env import BaseEnv
from rlightning.types import EnvMeta, EnvRet
from rlightning.utils.registry import ENVS


@ENVS.register("notebook_coin", override=True)
class CoinEnv(BaseEnv):
    """Guess the coin you are shown: reward 1 for action == coin; episodes of 4 steps (truncated)."""

    def __init__(self, config, worker_index=0, preprocess_fn=None):
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        self.action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        self.rng = np.random.default_rng()
        self.coin = np.zeros(self.num_envs, dtype=np.int64)
        self.t = np.zeros(self.num_envs, dtype=np.int64)
        self.prev_done = np.zeros(self.num_envs, dtype=bool)

    def _ret(self, reward, truncated):
        done = truncated.copy()
        ep_return, ep_length = self.episodes.update(reward, done)
        return EnvRet(
            env_id=self.env_id,
            observation=self.coin[:, None].astype(np.float32),
            last_reward=reward,
            last_terminated=np.zeros(self.num_envs, dtype=bool),
            last_truncated=truncated,
            info={"episode_return": ep_return, "episode_length": ep_length},
        )

    def reset(self, seed=None, options=None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.coin = self.rng.integers(0, 2, self.num_envs)
        self.t[:] = 0
        self.prev_done[:] = False
        ep_return, ep_length = self.episodes.reset()
        n = self.num_envs
        return EnvRet(
            env_id=self.env_id,
            observation=self.coin[:, None].astype(np.float32),
            last_reward=np.zeros(n, dtype=np.float32),
            last_terminated=np.zeros(n, dtype=bool),
            last_truncated=np.zeros(n, dtype=bool),
            info={"episode_return": ep_return, "episode_length": ep_length},
        )

    def step(self, policy_resp):
        self.check_policy_resp(policy_resp)
        action = np.asarray(self.preprocess_fn(policy_resp))
        reward = (action == self.coin).astype(np.float32)
        self.t += 1
        truncated = self.t >= 4
        prev = self.prev_done
        reward[prev] = 0.0
        truncated[prev] = False
        self.t[prev] = 0
        self.coin = self.rng.integers(0, 2, self.num_envs)
        self.prev_done = truncated.copy()
        return self._ret(reward, truncated)

    def get_metadata(self):
        return EnvMeta(self.env_id, self.action_space, self.observation_space, self.num_envs)


class NotebookWalk(gym.Env):
    """A walk on a line: observation [position]; action 0/1 moves -1/+1; terminates at +-3."""

    def __init__(self, start=0):
        self.observation_space = gym.spaces.Box(-3.0, 3.0, (1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.start = start
        self.pos = start

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.start
        return np.array([self.pos], dtype=np.float32), {}

    def step(self, action):
        self.pos += 1 if int(action) == 1 else -1
        terminated = abs(self.pos) >= 3
        return np.array([self.pos], dtype=np.float32), 1.0, terminated, False, {}


if "NotebookWalk-v0" in gym.registry:
    del gym.registry["NotebookWalk-v0"]
gym.register(id="NotebookWalk-v0", entry_point=NotebookWalk)
'''


def load_notebook_cell(name: str = "notebook_cell") -> types.ModuleType:
    """Run the cell in a new module that is not registered in ``sys.modules`` (like a notebook's classes)."""
    module = types.ModuleType(name)
    exec(compile(NOTEBOOK_CELL, f"<{name}>", "exec"), module.__dict__)  # noqa: S102 - a test stand-in for a cell
    return module
