"""Partially observed versions of classic-control tasks: `MaskVelocityObservation` (``env.wrappers: [mask_velocity]``).

    env:
      name: CartPole-v1
      wrappers: [mask_velocity]            # observations (x, 0, theta, 0): positions only

Hiding the velocities makes a Markov task partially observed: the velocities must be inferred from the
observation history, which a recurrent policy can do and a feed-forward one cannot (the benchmark of
recurrent PPO in sb3-contrib and rl-baselines3-zoo, whose ``MaskVelocityWrapper`` does the same).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

import gymnasium as gym
import numpy as np

__all__ = ["VELOCITY_INDICES", "MaskVelocityObservation"]

#: Observation entries that are velocities, per env family (the id without its version).
VELOCITY_INDICES: Dict[str, Tuple[int, ...]] = {
    "CartPole": (1, 3),  # cart velocity, pole angular velocity
    "MountainCar": (1,),  # velocity
    "MountainCarContinuous": (1,),
    "Pendulum": (2,),  # angular velocity
    "LunarLander": (2, 3, 5),  # linear velocities, angular velocity
    "LunarLanderContinuous": (2, 3, 5),
}


def _family(env: gym.Env) -> Optional[str]:
    spec = env.spec
    if spec is None:
        return None
    return spec.name


class MaskVelocityObservation(gym.ObservationWrapper):
    """Sets the velocity entries of a flat Box observation to zero (the space keeps its shape).

    Args:
        env: The env to wrap (a 1-D Box observation space).
        indices: Entries to hide; None takes the env's velocities from `VELOCITY_INDICES` by its id.

    Raises:
        ValueError: the observation space is not a 1-D Box, ``indices`` is None for an env not in
            `VELOCITY_INDICES` (the known ones named), or an index is outside the observation.
    """

    def __init__(self, env: gym.Env, indices: Optional[Sequence[int]] = None) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise ValueError(f"mask_velocity needs a 1-D Box observation space, got {space!r}")
        if indices is None:
            family = _family(env)
            if family not in VELOCITY_INDICES:
                raise ValueError(
                    f"mask_velocity does not know the velocities of env {family!r}; pass indices=[...] "
                    f"(known envs: {', '.join(sorted(VELOCITY_INDICES))})"
                )
            indices = VELOCITY_INDICES[family]
        idx = [int(i) for i in indices]
        size = int(space.shape[0])
        bad = [i for i in idx if not -size <= i < size]
        if bad:
            raise ValueError(f"mask_velocity indices {bad} are outside the observation of size {size}")
        self.indices = tuple(i % size for i in idx)
        keep = np.ones(size, dtype=bool)
        keep[list(self.indices)] = False
        self._keep = keep.astype(space.dtype)
        low = np.where(keep, space.low, 0).astype(space.dtype)
        high = np.where(keep, space.high, 0).astype(space.dtype)
        self.observation_space = gym.spaces.Box(low=low, high=high, dtype=space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        """The observation with the velocity entries set to zero."""
        return observation * self._keep
