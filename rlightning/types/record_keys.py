"""The rollout record's key names and per-row observation specs (see `rlightning.types.record`).

Shared by the record's checks (`rlightning.types.record`) and its builder from the seed types
(`rlightning.types.record_build`). Pure numpy; never imports torch or Ray.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

OBS = "obs"
ACTION = "action"
NEXT = "next"
REWARD = "reward"
TERMINATED = "terminated"
TRUNCATED = "truncated"
DONE = "done"
VALID = "valid"
VALUE = "value"
EPISODE_ID = "episode_id"
ENV_ID = "env_id"
#: The observation key (of a Dict observation) an env gives its action mask under (PettingZoo's convention).
ACTION_MASK = "action_mask"

NEXT_OBS = (NEXT, OBS)
NEXT_REWARD = (NEXT, REWARD)
NEXT_TERMINATED = (NEXT, TERMINATED)
NEXT_TRUNCATED = (NEXT, TRUNCATED)
NEXT_DONE = (NEXT, DONE)
NEXT_VALUE = (NEXT, VALUE)
FLAG_KEYS = (NEXT_TERMINATED, NEXT_TRUNCATED, NEXT_DONE)

#: Keys every record has (``valid`` and ``episode_id`` are optional: all valid, ids unknown).
RECORD_KEYS = (OBS, ACTION, NEXT_OBS, NEXT_REWARD, NEXT_TERMINATED, NEXT_TRUNCATED, NEXT_DONE)

Spec = Dict[Tuple[str, ...], Tuple[Tuple[int, ...], Any]]


class RecordKeyError(KeyError, ValueError):
    """A record lacks a required key (a KeyError and a ValueError, with a readable message)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def key_tuple(key: Any) -> Tuple[str, ...]:
    """A record key as a tuple of names (``"obs"`` -> ``("obs",)``; tuples as they are)."""
    return key if isinstance(key, tuple) else (key,)


def _name(key: Any) -> str:
    return ".".join(key_tuple(key))


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


# ---------------------------------------------------------------------- spaces


def space_spec(space: Any, prefix: Tuple[str, ...] = (OBS,)) -> Optional[Spec]:
    """Per-row (shape, numpy dtype) of every observation leaf of a gymnasium space, keyed like a record.

    Dict spaces give nested keys; None when the space has no shape or dtype (e.g. Text).
    """
    if space is None:
        return None
    subspaces = getattr(space, "spaces", None)
    if isinstance(subspaces, Mapping):
        out: Spec = {}
        for name, sub in subspaces.items():
            sub_spec = space_spec(sub, prefix + (str(name),))
            if sub_spec is None:
                return None
            out.update(sub_spec)
        return out
    shape = getattr(space, "shape", None)
    dtype = getattr(space, "dtype", None)
    if shape is None or dtype is None:
        return None
    return {prefix: (tuple(int(s) for s in shape), np.dtype(dtype))}
