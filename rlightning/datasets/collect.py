"""Playing a policy into a dataset: `collect_episodes`, `collect_dataset`, reference returns.

    info = collect_dataset(run.policy(), run.config, "runs/data/medium", episodes=50, noise=0.1)
    random_return("Pendulum-v1", episodes=10)                # a random policy's mean return (ref_min_score)

The env is the run's (``config.env``: its gymnasium id, ``env_kwargs``, ``max_episode_steps`` and wrappers),
one gymnasium env played in this process. ``noise`` adds exploration to the policy's actions: Gaussian noise
of ``noise`` x the half-range of a Box, clipped to it; for a Discrete space a uniformly random action with
probability ``noise``. The dataset records the env's spec, a random policy's mean return as
``ref_min_score`` and, when given, an expert's as ``ref_max_score`` (Minari's reference scores).
"""

from __future__ import annotations

import os
from typing import Any, Callable, List, Optional, Tuple, Union

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlightning.datasets.episodes import Episode
from rlightning.datasets.minari_io import DatasetInfo, write_episodes

__all__ = ["collect_dataset", "collect_episodes", "env_spaces", "make_env", "random_return"]


def make_env(env: Any) -> gym.Env:
    """One gymnasium env from a gymnasium id, an ``EnvSpec``, a `MainConfig` or an `EnvConfig` (with its
    ``env_kwargs``, ``max_episode_steps`` and wrappers).

    Raises:
        ValueError: an env of another backend than gymnasium.
        TypeError: something that names no env.
    """
    from rlightning.utils.config import EnvConfig, MainConfig

    if isinstance(env, MainConfig):
        env = env.env
    if isinstance(env, EnvConfig):
        if env.backend != "gymnasium":
            raise ValueError(
                f"datasets are collected in gymnasium envs; env.backend is {env.backend!r} (use 'gymnasium')"
            )
        from rlightning.env.gym_env import resolve_env_spec
        from rlightning.env.wrappers import apply_wrappers, resolve_wrappers

        kwargs = dict(env.env_kwargs)
        if env.max_episode_steps is not None:
            kwargs["max_episode_steps"] = env.max_episode_steps
        return apply_wrappers(gym.make(resolve_env_spec(env.name), **kwargs), resolve_wrappers(env.wrappers))
    if isinstance(env, (str, gym.envs.registration.EnvSpec)):
        return gym.make(env)
    raise TypeError(f"an env is a gymnasium id, an EnvSpec, a MainConfig or an EnvConfig, got {type(env).__name__}")


def env_spaces(env: Any) -> Tuple[Any, Any, Any]:
    """``(observation_space, action_space, env_spec)`` of an env given as `make_env` takes it, a ``gym.Env``
    or an `EnvMeta` (spec None)."""
    from rlightning.types import EnvMeta

    if isinstance(env, EnvMeta):
        return env.observation_space, env.action_space, None
    if isinstance(env, gym.Env):
        return env.observation_space, env.action_space, env.spec
    made = make_env(env)
    try:
        return made.observation_space, made.action_space, made.spec
    finally:
        made.close()


def _with_noise(action: np.ndarray, space: Any, noise: float, rng: np.random.Generator) -> np.ndarray:
    if noise <= 0:
        return action
    if isinstance(space, spaces.Box):
        half = (space.high - space.low) / 2.0
        noisy = action + rng.normal(0.0, 1.0, np.shape(action)) * noise * half
        return np.clip(noisy, space.low, space.high).astype(space.dtype)
    if isinstance(space, spaces.Discrete):
        return np.asarray(space.start + rng.integers(space.n)) if rng.random() < noise else action
    raise ValueError(f"noise is defined for Box and Discrete actions, got {space!r}")


def collect_episodes(
    act: Optional[Callable[[Any], Any]],
    env: Any,
    episodes: int,
    noise: float = 0.0,
    seed: int = 0,
) -> List[Episode]:
    """Play ``episodes`` episodes with ``act(obs) -> action`` (None: uniformly random actions).

    Raises:
        ValueError: ``episodes`` below 1, ``noise`` outside [0, 1].
    """
    if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
        raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
    if not 0.0 <= float(noise) <= 1.0:
        raise ValueError(f"noise must be in [0, 1] (a fraction of the action range, or an epsilon), got {noise!r}")
    made = env if isinstance(env, gym.Env) else make_env(env)
    rng = np.random.default_rng(seed)
    made.action_space.seed(seed)
    out = []
    try:
        for k in range(episodes):
            obs, _ = made.reset(seed=seed + k)
            observations, actions, rewards, terms, truncs = [obs], [], [], [], []
            while True:
                action = made.action_space.sample() if act is None else act(obs)
                action = _with_noise(np.asarray(action), made.action_space, float(noise), rng)
                obs, reward, terminated, truncated, _ = made.step(action)
                observations.append(obs)
                actions.append(action)
                rewards.append(float(reward))
                terms.append(bool(terminated))
                truncs.append(bool(truncated))
                if terminated or truncated:
                    break
            out.append(
                Episode(
                    observations=np.stack([np.asarray(o) for o in observations]),
                    actions=np.stack(actions),
                    rewards=np.asarray(rewards, dtype=np.float64),
                    terminations=np.asarray(terms, bool),
                    truncations=np.asarray(truncs, bool),
                )
            )
    finally:
        if made is not env:
            made.close()
    return out


def random_return(env: Any, episodes: int = 10, seed: int = 12_345) -> float:
    """The mean return of uniformly random actions over ``episodes`` episodes (Minari's ``ref_min_score``)."""
    return float(np.mean([e.episode_return for e in collect_episodes(None, env, episodes, seed=seed)]))


def collect_dataset(
    policy: Any,
    config: Any,
    path_or_id: Union[str, os.PathLike],
    episodes: int = 10,
    deterministic: bool = False,
    noise: float = 0.0,
    seed: Optional[int] = None,
    ref_min_score: Optional[float] = None,
    ref_max_score: Union[float, str, None] = None,
    ref_episodes: int = 10,
    overwrite: bool = False,
    description: Optional[str] = None,
) -> DatasetInfo:
    """Play ``policy`` (a `StandalonePolicy`) in ``config``'s env and write the episodes as a Minari dataset.

    Args:
        policy: Acts through ``predict(obs, deterministic=...)``.
        config: The run's `MainConfig` (its env).
        path_or_id: A folder, or a Minari id.
        episodes: Episodes to play.
        deterministic: The policy's most likely actions (True) or samples of its distribution.
        noise: Exploration added to the actions (see the module's docstring); 0: none.
        seed: Seeds the env resets and the noise (None: ``config.seed``).
        ref_min_score: A random policy's mean return (None: measured over ``ref_episodes`` episodes).
        ref_max_score: An expert's mean return; ``"policy"``: this policy's own deterministic mean return over
            ``ref_episodes`` episodes (when it is the expert); None: not recorded (no normalised score).
        ref_episodes: Episodes for the measured reference returns.
        overwrite: Replace a dataset already there.
        description: Recorded in the metadata.

    Raises:
        ValueError: bad ``episodes`` / ``noise`` / ``ref_max_score``, or anything `write_episodes` refuses.
        FileExistsError: a dataset is there already and ``overwrite`` is False.
    """
    if isinstance(ref_max_score, str) and ref_max_score != "policy":
        raise ValueError(f"ref_max_score is a number, 'policy' or None, got {ref_max_score!r}")
    seed = int(config.seed if seed is None else seed)
    env = make_env(config)
    try:

        def act(obs: Any) -> Any:
            return policy.predict(obs, deterministic=deterministic)[0]

        played = collect_episodes(act, env, episodes, noise=noise, seed=seed)
        if ref_min_score is None and ref_episodes > 0:
            ref_min_score = random_return(env, ref_episodes)
        if ref_max_score == "policy":
            greedy = collect_episodes(lambda o: policy.predict(o, deterministic=True)[0], env, ref_episodes, seed=seed)
            ref_max_score = float(np.mean([e.episode_return for e in greedy]))
        return write_episodes(
            played,
            path_or_id,
            observation_space=env.observation_space,
            action_space=env.action_space,
            env_spec=env.spec,
            ref_min_score=ref_min_score,
            ref_max_score=ref_max_score,
            algorithm_name=f"rlightning {config.policy.type}",
            description=description
            or f"{episodes} episodes of a {config.policy.type} policy on {config.env.name} "
            f"({'deterministic' if deterministic else 'sampled'} actions, noise {noise})",
            overwrite=overwrite,
        )
    finally:
        env.close()
