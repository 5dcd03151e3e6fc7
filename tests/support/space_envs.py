"""`SpaceEnv`: one small env per observation and action space of gymnasium's space zoo, optionally masked.

With ``mask=True`` the observation is ``{"observation": <obs>, "action_mask": MultiBinary(width)}`` and the
env raises on an action its mask did not allow, so any path that ignores the mask fails the run.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

OBS_KINDS = ("box", "discrete", "multi_discrete", "multi_binary", "tuple", "nested_dict", "image")
ACTION_KINDS = ("discrete_start", "multi_discrete", "multi_binary", "box_asym")


def obs_space(kind: str) -> spaces.Space:
    box = spaces.Box(-1.0, 1.0, (3,), np.float32)
    return {
        "box": box,
        "discrete": spaces.Discrete(5),
        "multi_discrete": spaces.MultiDiscrete([3, 4]),
        "multi_binary": spaces.MultiBinary(4),
        "tuple": spaces.Tuple((box, spaces.Discrete(3))),
        "nested_dict": spaces.Dict({"pos": box, "inner": spaces.Dict({"vel": spaces.Box(-1, 1, (2,), np.float32)})}),
        "image": spaces.Box(0, 255, (6, 6, 2), np.uint8),
    }[kind]


def action_space(kind: str) -> spaces.Space:
    return {
        "discrete_start": spaces.Discrete(4, start=1),
        "multi_discrete": spaces.MultiDiscrete([3, 2]),
        "multi_binary": spaces.MultiBinary(3),
        "box_asym": spaces.Box(np.array([-1.0, 0.0], np.float32), np.array([2.0, 5.0], np.float32)),
    }[kind]


class SpaceEnv(gym.Env):
    """Episodes of 8 steps; reward 1 for the action's first choice matching the step's parity."""

    def __init__(self, obs: str = "box", act: str = "discrete_start", mask: bool = False, length: int = 8):
        self.inner_space = obs_space(obs)
        self.action_space = action_space(act)
        self.mask = mask
        self.length = length
        if mask:
            if isinstance(self.action_space, spaces.Discrete):
                self.width = int(self.action_space.n)
            elif isinstance(self.action_space, spaces.MultiDiscrete):
                self.width = int(np.sum(self.action_space.nvec))
            else:  # no mask fits other actions: the build must refuse it
                self.width = int(np.prod(self.action_space.shape))
            self.observation_space = spaces.Dict(
                {"observation": self.inner_space, "action_mask": spaces.MultiBinary(self.width)}
            )
        else:
            self.observation_space = self.inner_space
        self.t = 0
        self.allowed = None

    def _obs(self):
        obs = self.inner_space.sample() if self.inner_space is not None else None
        if not self.mask:
            return obs
        sizes = [self.width] if isinstance(self.action_space, spaces.Discrete) else list(self.action_space.nvec)
        parts = []
        for n in sizes:  # each entry allows a random non-empty subset, never all of them
            keep = np.zeros(n, np.int8)
            keep[self.np_random.choice(n, size=max(1, n // 2), replace=False)] = 1
            parts.append(keep)
        self.allowed = parts
        return {"observation": obs, "action_mask": np.concatenate(parts)}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.inner_space.seed(int(self.np_random.integers(2**31)))
        self.t = 0
        return self._obs(), {}

    def _check_mask(self, action) -> None:
        if isinstance(self.action_space, spaces.Discrete):
            choices = [int(action) - int(self.action_space.start)]
        else:
            choices = list(np.asarray(action).reshape(-1) - np.asarray(self.action_space.start).reshape(-1))
        for allowed, choice in zip(self.allowed, choices):
            if not allowed[int(choice)]:
                raise ValueError(f"masked action {action} taken (mask {self.allowed})")

    def step(self, action):
        if not self.action_space.contains(np.asarray(action, dtype=self.action_space.dtype)):
            raise ValueError(f"action {action!r} outside {self.action_space}")
        if self.mask:
            self._check_mask(action)
        first = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        reward = float(int(first) % 2 == self.t % 2)
        self.t += 1
        return self._obs(), reward, False, self.t >= self.length, {}
