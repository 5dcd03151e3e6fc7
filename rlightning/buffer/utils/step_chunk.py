"""Seed-edge steps (`Storage.add_transition`, `add_data_async`) as `Chunk` columns of the one writer.

The per-step adds of the seed API go through the same writer as whole records: each paired step becomes one
column (`step_columns`: the step's observation, action and extras, the next step's observation, reward, flags
and value, in numpy) and a run of consecutive columns of one env becomes an ``[N, k]`` chunk (`columns_chunk`)
whose env `OpenEpisodes` stores the episodes it closes. What is stored is what the converter
(`rlightning.types.record.record_leaves`) gives for those steps as part of a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import torch

from rlightning.buffer.utils.open_episodes import Chunk
from rlightning.types.record import NEXT, OBS, REWARD, TERMINATED, TRUNCATED, VALUE, key_tuple
from rlightning.types.stored_names import stored_name

__all__ = ["StepColumns", "columns_chunk", "step_columns"]

_FLAGS = (REWARD, TERMINATED, TRUNCATED)
_NAMES: Dict[Tuple[Any, ...], Tuple[Tuple[Tuple[Any, str], ...], Tuple[Tuple[Any, str], ...]]] = {}


def _names(step: Mapping[Any, Any], next_step: Mapping[Any, Any]):
    """(step key, stored name) of the stored keys of ``step`` and of the next observation keys of ``next_step``
    (cached by the keys: every step of a run has the same)."""
    sig = (tuple(step), tuple(next_step))
    got = _NAMES.get(sig)
    if got is None:
        own = tuple((k, name) for k in step if k not in _FLAGS for name in [stored_name(key_tuple(k))] if name)
        nxt = tuple((k, stored_name((NEXT,) + key_tuple(k))) for k in next_step if key_tuple(k)[0] == OBS)
        got = _NAMES[sig] = (own, nxt)
    return got


def _column(value: Any, n: int, dtype: Any = None) -> np.ndarray:
    """A copy of ``value`` as ``[N, ...]`` (a column may wait for later steps: the caller's arrays may change)."""
    arr = np.array(value, dtype=dtype)
    return arr.reshape((n,) + arr.shape[1:])


@dataclass
class StepColumns:
    """One paired step as ``[N, ...]`` numpy columns.

    Attributes:
        data: Stored key -> the step's column (observation, action, extras, next observation, reward, flags;
            ``done``: the env's episode ends at this step, terminated or truncated).
        valid: ``[N]`` the step was acted on (its observation is not the end of an episode).
        boot: ``[N]`` float32 value of the next observation (the bootstrap where an episode ends), or None.
        bad: ``[N]`` rows whose episode the NaN guard drops, or None.
        reward: ``[N]`` float64 rewards as the env gave them (for episode stats).
    """

    data: Dict[str, np.ndarray]
    valid: np.ndarray
    boot: Optional[np.ndarray]
    bad: Optional[np.ndarray]
    reward: np.ndarray

    @property
    def ends(self) -> bool:
        """An episode of some row ends here or is dropped: its episodes are stored (or dropped) now."""
        return bool(self.data["done"].any()) or self.bad is not None


def step_columns(
    n: int,
    step: Mapping[Any, np.ndarray],
    next_step: Mapping[Any, np.ndarray],
    raw_reward: np.ndarray,
    drop: Optional[np.ndarray],
) -> StepColumns:
    """The columns of one step (see `StepColumns`).

    Args:
        n: Sub-envs of the env worker.
        step: The checked step dict the action was chosen on (observation, action, extras, its flags).
        next_step: The next checked step dict (next observation, reward and flags of the action, value).
        raw_reward: ``[N]`` (or ``[1]``) rewards as the env gave them (for episode stats).
        drop: ``[N]`` rows whose episode the NaN guard drops, or None.
    """
    own, nxt = _names(step, next_step)
    data: Dict[str, np.ndarray] = {name: _column(step[k], n) for k, name in own}
    for k, name in nxt:
        data[name] = _column(next_step[k], n)
    term = _column(next_step[TERMINATED], n, bool).reshape(n)
    trunc = _column(next_step[TRUNCATED], n, bool).reshape(n)
    data["reward"] = _column(next_step[REWARD], n, np.float32)
    data["terminated"] = term
    data["truncated"] = trunc
    data["done"] = term | trunc
    valid = ~(np.asarray(step[TERMINATED], dtype=bool).reshape(n) | np.asarray(step[TRUNCATED], dtype=bool).reshape(n))
    boot = None
    if VALUE in next_step:
        boot = np.array(next_step[VALUE], dtype=np.float32).reshape(n, -1)[:, 0]
    bad = None
    if drop is not None and drop.any():
        bad = np.array(drop, dtype=bool).reshape(n)
    reward = np.broadcast_to(np.asarray(raw_reward, np.float64).reshape(-1), (n,)).copy()
    return StepColumns(data, valid, boot, bad, reward)


def _stacked(parts: List[np.ndarray]) -> np.ndarray:
    """``[N, k, ...]`` of k ``[N, ...]`` columns (a view of the one column's own copy, or a new array)."""
    return parts[0][:, None] if len(parts) == 1 else np.stack(parts, axis=1)


def columns_chunk(
    n: int, cols: List[StepColumns], close_on_done: bool
) -> Tuple[Chunk, Optional[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``[N, k]`` chunk of ``k`` consecutive steps of one env (columns of the same keys, shapes and dtypes), with
    its bad rows, raw rewards, raw done flags and valid mask (each ``[N, k]``).

    Args:
        n: Sub-envs of the env worker.
        cols: The steps, oldest first.
        close_on_done: Done flags close episodes (``auto_truncate_episode``).
    """
    k = len(cols)
    data = {}
    for name, first in cols[0].data.items():
        data[name] = torch.from_numpy(_stacked([c.data[name] for c in cols]).reshape((n * k,) + first.shape[1:]))
    valid = torch.from_numpy(_stacked([c.valid for c in cols]))
    raw_done = data["done"].reshape(n, k)
    if close_on_done:
        kept, closing = valid.clone(), raw_done & valid
    else:
        kept, closing = torch.ones(n, k, dtype=torch.bool), torch.zeros(n, k, dtype=torch.bool)
    boot = None if cols[0].boot is None else torch.from_numpy(_stacked([c.boot for c in cols]))
    bad = None
    if any(c.bad is not None for c in cols):
        none = np.zeros(n, dtype=bool)
        bad = torch.from_numpy(_stacked([none if c.bad is None else c.bad for c in cols]))
    reward = torch.from_numpy(_stacked([c.reward for c in cols]))
    return Chunk(data, n, k, kept, closing, boot), bad, reward, raw_done.clone(), valid
