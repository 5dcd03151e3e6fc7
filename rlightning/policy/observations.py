"""A policy's batch of observations from EnvRets: checked against the observation space, structured like it
(Dict and Tuple spaces stay dicts and tuples of ``[rows, ...]`` arrays), writable for torch."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["obs_rows", "writable"]


def obs_rows(obs: Any, space: Any, env_id: Any, what: str) -> Any:
    """``obs`` (one env worker's batch) as arrays ``[num_envs, *space.shape]``, structured like ``space``."""
    from gymnasium import spaces

    if isinstance(space, spaces.Dict):
        if not isinstance(obs, dict):
            raise TypeError(
                f"EnvRet {env_id!r}: {what} is a {type(obs).__name__}, the Dict observation space needs a dict "
                f"with keys {sorted(space.spaces)}"
            )
        missing = [k for k in space.spaces if k not in obs]
        if missing:
            raise KeyError(f"EnvRet {env_id!r}: {what} lacks keys {missing} of its Dict space (got {sorted(obs)})")
        return {k: obs_rows(obs[k], sub, env_id, f"{what}[{k!r}]") for k, sub in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(obs, (tuple, list)) or len(obs) != len(space.spaces):
            raise TypeError(
                f"EnvRet {env_id!r}: {what} needs a tuple of {len(space.spaces)} entries for its Tuple space, "
                f"got {type(obs).__name__}"
            )
        return tuple(obs_rows(o, sub, env_id, f"{what}[{i}]") for i, (o, sub) in enumerate(zip(obs, space.spaces)))
    arr = np.asarray(obs)
    expected = tuple(space.shape) if getattr(space, "shape", None) is not None else None
    if expected is not None and (arr.ndim != 1 + len(expected) or tuple(arr.shape[1:]) != expected):
        raise ValueError(
            f"EnvRet {env_id!r}: {what} shape {tuple(arr.shape)} is not [num_envs, *{expected}]; "
            "an env worker sends a leading num_envs dimension, also for num_envs == 1"
        )
    return arr


def writable(obs: Any) -> Any:
    """``obs`` with writable arrays (zero-copy arrays from Ray's object store are read-only; torch wants
    writable memory)."""
    if isinstance(obs, dict):
        return {k: writable(v) for k, v in obs.items()}
    if isinstance(obs, tuple):
        return tuple(writable(v) for v in obs)
    return obs if obs.flags.writeable else obs.copy()
