"""`SingleEnvVector`: one gymnasium env seen as a NEXT_STEP vector env of size 1.

It behaves as ``SyncVectorEnv`` with one sub-env does (same seeding, same
NEXT_STEP autoreset, same batched info), without the per-step action
iteration, concatenation and deep copy that make ``SyncVectorEnv`` slower than
the env itself. The gymnasium backend uses it for ``num_envs == 1`` in
``auto`` mode.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array


class SingleEnvVector(gym.vector.VectorEnv):
    """Wrap ``env`` as a vector env of one sub-environment (NEXT_STEP autoreset).

    Args:
        env: A gymnasium env (as ``gymnasium.make`` returns it).
    """

    def __init__(self, env: gym.Env) -> None:
        self.env = env
        self.num_envs = 1
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(env.observation_space, 1)
        self.action_space = batch_space(env.action_space, 1)
        self.metadata = dict(getattr(env, "metadata", None) or {})
        self.metadata["autoreset_mode"] = AutoresetMode.NEXT_STEP
        self.render_mode = getattr(env, "render_mode", None)
        self._array_obs = isinstance(env.observation_space, gym.spaces.Box)
        self._autoreset = False

    def _batch(self, obs: Any) -> Any:
        if self._array_obs:
            return np.array(obs)[None]
        return concatenate(self.single_observation_space, [obs], create_empty_array(self.single_observation_space, 1))

    def _info(self, info: Dict[str, Any]) -> Dict[str, Any]:
        return self._add_info({}, info, 0) if info else {}

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[Any, Dict[str, Any]]:
        """Reset the env (seeded with ``seed``, as sub-env 0 of ``SyncVectorEnv`` would be)."""
        if isinstance(seed, (list, tuple)):
            seed = seed[0]
        obs, info = self.env.reset(seed=seed, options=options)
        self._autoreset = False
        return self._batch(obs), self._info(info)

    def step(self, actions: Any) -> Tuple[Any, np.ndarray, np.ndarray, np.ndarray, Dict[str, Any]]:
        """Step with ``actions[0]``; after a done step, reset instead and ignore the action."""
        if self._autoreset:
            obs, info = self.env.reset()
            reward, terminated, truncated = 0.0, False, False
        else:
            obs, reward, terminated, truncated, info = self.env.step(actions[0])
        self._autoreset = bool(terminated or truncated)
        return (
            self._batch(obs),
            np.array([reward], dtype=np.float64),
            np.array([terminated], dtype=bool),
            np.array([truncated], dtype=bool),
            self._info(info),
        )

    def close_extras(self, **kwargs: Any) -> None:
        """Close the wrapped env."""
        self.env.close()
