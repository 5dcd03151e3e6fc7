"""Gymnasium wrappers named in the config (``env.wrappers``), resolved in the driver, applied in the worker.

    env:
      name: ALE/Breakout-v5
      env_kwargs: {frameskip: 1}
      wrappers:
        - atari_preprocessing                       # a short name (see WRAPPERS)
        - {name: frame_stack, kwargs: {stack_size: 4}}
        - {name: gymnasium.wrappers:TransformReward, kwargs: {func: ...}}   # or any "module:Class"

Each entry is a short name from `WRAPPERS`, the class name of a wrapper in
``gymnasium.wrappers`` (``FrameStackObservation``), or a ``module:Class`` entry
point. Wrappers wrap every sub-environment, in the order listed, inside the
env worker. `resolve_wrappers` runs in the driver when the run is built, so an
unknown name fails before any actor starts, naming the closest valid names.

``normalize_reward`` and ``clip_reward`` are the exception: the gymnasium
backend applies their vector versions over the whole vector env, above a tap
that keeps the env's own reward, so the episode returns in the metrics and in
evaluations are the env's (as CleanRL's and SB3's episode monitors report
them) while the learner trains on the transformed reward.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Sequence

import gymnasium as gym
import gymnasium.wrappers.vector  # noqa: F401 - the vector reward wrappers
import numpy as np

from rlightning.utils.registry import closest

__all__ = [
    "VECTOR_REWARD_WRAPPERS",
    "WRAPPERS",
    "RawRewardTap",
    "TupleToDict",
    "WrapperSpec",
    "apply_wrappers",
    "resolve_wrappers",
]

#: Short names of the gymnasium wrappers researchers reach for, and the class each stands for.
WRAPPERS: Dict[str, str] = {
    "atari_preprocessing": "AtariPreprocessing",
    "frame_stack": "FrameStackObservation",
    "grayscale": "GrayscaleObservation",
    "resize": "ResizeObservation",
    "reshape": "ReshapeObservation",
    "flatten": "FlattenObservation",
    "normalize_obs": "NormalizeObservation",
    "normalize_reward": "NormalizeReward",
    "clip_reward": "ClipReward",
    "clip_action": "ClipAction",
    "rescale_action": "RescaleAction",
    "time_limit": "TimeLimit",
    "episode_statistics": "RecordEpisodeStatistics",
    "dtype": "DtypeObservation",
    "max_and_skip": "MaxAndSkipObservation",
    "sticky_action": "StickyAction",
    "tuple_to_dict": "rlightning.env.wrappers:TupleToDict",
    "mask_velocity": "rlightning.env.pomdp:MaskVelocityObservation",
    "info_action_mask": "rlightning.env.action_masks:InfoActionMask",
}

#: Reward wrappers the gymnasium backend applies over the vector env instead of each sub-env (their vector
#: versions take the same arguments), so that episode returns can count the env's own reward.
VECTOR_REWARD_WRAPPERS: Dict[type, type] = {
    gym.wrappers.NormalizeReward: gym.wrappers.vector.NormalizeReward,
    gym.wrappers.ClipReward: gym.wrappers.vector.ClipReward,
}


class RawRewardTap(gym.vector.VectorWrapper):
    """Passes a vector env through and keeps the reward array of its last step in ``last_reward``.

    The gymnasium backend puts it under the vector reward wrappers (`VECTOR_REWARD_WRAPPERS`): the
    episode returns it reports count the env's own reward, not the normalised or clipped one.
    """

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self.last_reward = np.zeros(env.num_envs, dtype=np.float64)

    def step(self, actions: Any) -> Any:
        obs, reward, terminated, truncated, info = self.env.step(actions)
        self.last_reward = np.array(reward, dtype=np.float64)  # a copy: the clip wrapper writes in place
        return obs, reward, terminated, truncated, info


def _has_tuple(space: gym.Space) -> bool:
    if isinstance(space, gym.spaces.Tuple):
        return True
    if isinstance(space, gym.spaces.Dict):
        return any(_has_tuple(s) for s in space.spaces.values())
    return False


def _dict_space(space: gym.Space) -> gym.Space:
    if isinstance(space, gym.spaces.Tuple):
        return gym.spaces.Dict({str(i): _dict_space(s) for i, s in enumerate(space.spaces)})
    if isinstance(space, gym.spaces.Dict):
        return gym.spaces.Dict({k: _dict_space(s) for k, s in space.spaces.items()})
    return space


def _dict_obs(obs: Any) -> Any:
    if isinstance(obs, tuple):
        return {str(i): _dict_obs(o) for i, o in enumerate(obs)}
    if isinstance(obs, dict):
        return {k: _dict_obs(o) for k, o in obs.items()}
    return obs


class TupleToDict(gym.ObservationWrapper):
    """Tuple observation spaces (at any depth) as Dict spaces keyed ``"0"``, ``"1"``, ...

    The record keeps observations as nested keys, so a Tuple observation travels as a dict; the gymnasium
    backend adds this wrapper itself (last) to an env whose observation space holds a Tuple.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.observation_space = _dict_space(env.observation_space)

    def observation(self, observation: Any) -> Any:
        return _dict_obs(observation)


@dataclass(frozen=True)
class WrapperSpec:
    """A resolved wrapper: its class and keyword arguments (picklable, so it travels to Ray workers)."""

    name: str
    cls: type
    kwargs: Dict[str, Any] = field(default_factory=dict)

    def wrap(self, env: gym.Env) -> gym.Env:
        """``cls(env, **kwargs)``, with the wrapper named in an error."""
        try:
            return self.cls(env, **self.kwargs)
        except TypeError as err:
            raise TypeError(
                f"env wrapper {self.name!r} ({self.cls.__name__}) with kwargs {self.kwargs}: {err}"
            ) from err


def _known_names() -> List[str]:
    gym_names = [n for n in dir(gym.wrappers) if isinstance(getattr(gym.wrappers, n, None), type)]
    return list(WRAPPERS) + sorted(n for n in gym_names if issubclass(getattr(gym.wrappers, n), gym.Wrapper))


def _unknown(name: str, detail: str = "") -> KeyError:
    near = closest(name, _known_names(), n=5)
    hint = f"; closest: {', '.join(map(repr, near))}" if near else ""
    extra = f" ({detail})" if detail else ""
    return KeyError(
        f"unknown env wrapper {name!r}{extra}{hint}. Use a short name ({', '.join(WRAPPERS)}), a class in "
        "gymnasium.wrappers, or a 'module:Class' entry point"
    )


def _resolve_class(name: str) -> type:
    if ":" in name:
        module_name, attr = name.split(":", 1)
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise _unknown(name, f"module {module_name!r} cannot be imported: {err}") from None
        obj = getattr(module, attr, None)
        if obj is None:
            raise _unknown(name, f"module {module_name!r} has no {attr!r}")
    else:
        attr = WRAPPERS.get(name, name)
        if ":" in attr:
            return _resolve_class(attr)
        obj = getattr(gym.wrappers, attr, None)
        if not isinstance(obj, type):
            raise _unknown(name)
    if not (isinstance(obj, type) and issubclass(obj, gym.Wrapper)) and not callable(obj):
        raise TypeError(f"env wrapper {name!r} is {obj!r}, not a gymnasium.Wrapper class or a callable(env, **kwargs)")
    return obj


def _check_kwargs(name: str, cls: Callable, kwargs: Dict[str, Any]) -> None:
    try:
        sig = inspect.signature(cls)
    except (TypeError, ValueError):
        return
    params = list(sig.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return
    valid = [p.name for p in params[1:] if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    bad = [k for k in kwargs if k not in valid]
    if bad:
        near = closest(bad[0], valid, n=3)
        hint = f" (closest: {', '.join(map(repr, near))})" if near else ""
        raise KeyError(
            f"env wrapper {name!r} ({getattr(cls, '__name__', cls)}) has no argument {bad[0]!r}{hint}; "
            f"valid: {', '.join(valid) or 'none'}"
        )


def resolve_wrappers(entries: Sequence[Any]) -> List[WrapperSpec]:
    """Resolve the config's ``env.wrappers`` entries (names, or ``{"name", "kwargs"}`` dicts) to `WrapperSpec` s.

    Raises:
        KeyError: an unknown wrapper or keyword argument (the closest valid names listed).
        TypeError: an entry that is neither a string nor a ``{"name": ..., "kwargs": {...}}`` mapping.
    """
    out: List[WrapperSpec] = []
    for i, entry in enumerate(entries or ()):
        if isinstance(entry, str):
            name, kwargs = entry, {}
        elif isinstance(entry, dict) and isinstance(entry.get("name"), str):
            extra = set(entry) - {"name", "kwargs"}
            if extra:
                raise TypeError(f"env.wrappers[{i}] has keys {sorted(extra)}; an entry has 'name' and 'kwargs'")
            name, kwargs = entry["name"], entry.get("kwargs") or {}
            if not isinstance(kwargs, dict):
                raise TypeError(f"env.wrappers[{i}] ({name!r}): kwargs must be a mapping, got {kwargs!r}")
        else:
            raise TypeError(
                f"env.wrappers[{i}] must be a wrapper name or {{'name': ..., 'kwargs': {{...}}}}, got {entry!r}"
            )
        cls = _resolve_class(name)
        _check_kwargs(name, cls, kwargs)
        out.append(WrapperSpec(name, cls, dict(kwargs)))
    return out


def apply_wrappers(env: gym.Env, specs: Sequence[WrapperSpec] = ()) -> gym.Env:
    """Wrap ``env`` with each spec in order, then with `TupleToDict` if its observation space holds a Tuple."""
    for spec in specs:
        env = spec.wrap(env)
    if _has_tuple(env.observation_space):
        env = TupleToDict(env)
    return env
