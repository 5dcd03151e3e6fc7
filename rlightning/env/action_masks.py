"""`InfoActionMask` (``env.wrappers: [info_action_mask]``): an env's ``info["action_mask"]`` as an observation key.

    env:
      name: my_pkg.envs:Board            # reports the legal moves as info["action_mask"]
      wrappers: [info_action_mask]

Policies read action masks from the Dict observation key ``action_mask`` (PettingZoo's convention, see
`rlightning.policy.networks.masks`), so the mask is stored in every record beside the observation it belongs
to and the learner trains under the mask the actor acted under. This wrapper brings envs that report the mask
in ``info`` (as gymnasium's own examples and many simulators do) to that convention: the observation becomes
``{"observation": <the env's>, "action_mask": MultiBinary(n)}``.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

import gymnasium as gym
import numpy as np

from rlightning.types.record_keys import ACTION_MASK

__all__ = ["InfoActionMask"]


def _mask_width(space: gym.Space) -> int:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.n)
    if isinstance(space, gym.spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    raise ValueError(f"info_action_mask masks Discrete and MultiDiscrete actions; this env's action space is {space}")


class InfoActionMask(gym.Wrapper):
    """Moves ``info["action_mask"]`` into the observation (``{"observation": obs, "action_mask": mask}``).

    A step or reset whose info has no mask allows every action.

    Raises:
        ValueError: an action space that is not Discrete or MultiDiscrete, or a mask of the wrong size.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.width = _mask_width(env.action_space)
        self.observation_space = gym.spaces.Dict(
            {"observation": env.observation_space, ACTION_MASK: gym.spaces.MultiBinary(self.width)}
        )

    def _wrap(self, obs: Any, info: Dict[str, Any]) -> Dict[str, Any]:
        mask = info.get(ACTION_MASK)
        if mask is None:
            mask = np.ones(self.width, dtype=np.int8)
        mask = np.asarray(mask, dtype=np.int8).reshape(-1)
        if mask.shape[0] != self.width:
            raise ValueError(
                f"info['action_mask'] has {mask.shape[0]} entries; the action space {self.env.action_space} "
                f"needs {self.width}"
            )
        return {"observation": obs, ACTION_MASK: mask}

    def reset(self, **kwargs: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        obs, info = self.env.reset(**kwargs)
        return self._wrap(obs, info), info

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._wrap(obs, info), reward, terminated, truncated, info
