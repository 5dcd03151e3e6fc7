"""Records as storage chunks: stored key names, preprocessors and non-finite checks, on views of the record.

Stored (and sampled) keys are flat: ``obs``, ``action``, the extras,
``reward``, ``next_obs``, ``terminated``, ``truncated``, ``done``; nested
record keys are joined with dots (``obs.pixels``, ``next_obs.pixels``).
``valid``, ``episode_id``, ``next.value`` and ``env_id`` are not stored:
invalid steps are left out, ``next.value`` is the bootstrap of the episodes
that end at that step.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from rlightning.buffer.utils.open_episodes import Chunk
from rlightning.buffer.utils.preprocessors import IdentityPreprocessor, to_numpy
from rlightning.types.record import NEXT_DONE, NEXT_REWARD, NEXT_VALUE, VALID, VALUE, read_leaves
from rlightning.types.stored_names import stored_name

__all__ = [
    "chunk_from_leaves",
    "chunk_from_record",
    "is_identity",
    "nonfinite_steps",
    "preprocess_chunk",
    "step_rows",
    "stored_name",
]


def chunk_from_record(
    td: Any, close_on_done: bool, leaves: Optional[Dict[Tuple[str, ...], torch.Tensor]] = None
) -> Tuple[Chunk, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A validated record as a `Chunk` of views ``[N * T, ...]``, with its valid, done and reward ``[N, T]``.

    Args:
        td: The record (``[N]`` or ``[N, T]``).
        close_on_done: Done flags close episodes and invalid steps are left out (``auto_truncate_episode``);
            else every step is kept and episodes end only by truncation.
        leaves: The record's leaves already read (`read_leaves`), or None to read them here.
    """
    bdims = td.batch_dims
    n = td.batch_size[0]
    t = td.batch_size[1] if bdims == 2 else 1
    if leaves is None:
        leaves = read_leaves(td)
    return chunk_from_leaves(leaves, n, t, bdims, close_on_done)


def chunk_from_leaves(
    leaves: Dict[Tuple[str, ...], torch.Tensor], n: int, t: int, bdims: int, close_on_done: bool
) -> Tuple[Chunk, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`chunk_from_record` on the record's leaves (``{key: [N, (T,) ...] tensor}``)."""
    data: Dict[str, torch.Tensor] = {}
    key_strides: Dict[str, int] = {}
    views: Dict[str, torch.Tensor] = {}
    for key, v in leaves.items():
        name = stored_name(key)
        if name is None:
            continue
        rows, stride = step_rows(v, n, t, bdims)
        data[name] = rows
        if stride is not None:
            key_strides[name] = stride
            views[name] = v
    valid = leaves[(VALID,)].reshape(n, t) if (VALID,) in leaves else torch.ones(n, t, dtype=torch.bool)
    raw_done = leaves[NEXT_DONE].reshape(n, t)
    reward = leaves[NEXT_REWARD].reshape(n, t)
    if close_on_done:
        kept = valid
        done = raw_done & valid
    else:
        kept = torch.ones(n, t, dtype=torch.bool)
        done = torch.zeros(n, t, dtype=torch.bool)
    boot = None
    if NEXT_VALUE in leaves:
        boot = leaves[NEXT_VALUE].reshape(n, t, -1)[..., 0].to(torch.float32)
    elif (VALUE,) in leaves:
        value = leaves[(VALUE,)].reshape(n, t, -1)[..., 0].to(torch.float32)
        boot = torch.zeros(n, t, dtype=torch.float32)
        boot[:, :-1] = value[:, 1:]
    chunk = Chunk(data, n, t, kept, done, boot, key_strides=key_strides, views=views)
    return chunk, valid, raw_done, reward


def step_rows(v: torch.Tensor, n: int, t: int, bdims: int) -> Tuple[torch.Tensor, Optional[int]]:
    """A record leaf ``[N, (T,) ...]`` as rows without a copy: ``([N * T, ...] view, None)``, or for a
    strided ``[N, T]`` view (``[:, :T]`` of ``[N, T + 1]``) ``([(N - 1) * S + T, ...] view, S)`` where
    step ``c`` of sub-env ``r`` is row ``r * S + c``; a copy only for layouts neither can express."""
    rest = tuple(v.shape[bdims:])
    try:
        return v.view((n * t,) + rest), None
    except RuntimeError:
        pass
    if bdims == 2 and t > 1 and n > 0:
        s0, s1 = v.stride(0), v.stride(1)
        inner = v[0, 0]
        if s1 > 0 and s1 == inner.numel() and inner.is_contiguous() and s0 % s1 == 0 and s0 // s1 >= t:
            s = s0 // s1
            try:
                return v.as_strided(((n - 1) * s + t,) + rest, (s1,) + tuple(inner.stride()), v.storage_offset()), s
            except RuntimeError:
                pass
    return v.reshape((n * t,) + rest), None


def is_identity(fn: Optional[Callable], dtype: Optional[Any] = None) -> bool:
    """True when ``fn`` leaves a batch of ``dtype`` as it is (None, or an identity preprocessor)."""
    if fn is None:
        return True
    if type(fn) is IdentityPreprocessor:
        return fn.dtype is None or (dtype is not None and fn.dtype == dtype)
    return False


def _apply(fn: Callable, x: torch.Tensor, what: str) -> torch.Tensor:
    out = fn(x.cpu().numpy())
    try:
        arr = to_numpy(out)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what} returned {type(out).__name__}; it must return an array") from err
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} returned dtype {arr.dtype}; it must return real numbers")
    return torch.from_numpy(np.ascontiguousarray(arr))


def preprocess_chunk(chunk: Chunk, obs_fn: Optional[Callable], reward_fn: Optional[Callable]) -> None:
    """Apply the observation preprocessor to ``obs`` and ``next_obs`` (one call, both together) and the
    reward preprocessor to ``reward``, replacing the chunk's tensors (the record is not written to)."""
    data = chunk.data
    if "obs" in data and not is_identity(obs_fn):
        obs = chunk.flat("obs")
        rows = obs.shape[0]
        nxt = chunk.flat("next_obs") if "next_obs" in data else None
        both = obs if nxt is None else torch.cat([obs, nxt])
        out = _apply(obs_fn, both, "obs_preprocessor")
        if out.shape[0] != both.shape[0]:
            raise ValueError(f"obs_preprocessor returned {out.shape[0]} rows for {both.shape[0]}; keep the rows")
        chunk.set_flat("obs", out[:rows])
        if nxt is not None:
            chunk.set_flat("next_obs", out[rows:])
    if "reward" in data and not is_identity(reward_fn, np.dtype(np.float32)):
        reward = chunk.flat("reward")
        out = _apply(reward_fn, reward, "reward_preprocessor").reshape(-1).to(torch.float32)
        if out.shape[0] != reward.shape[0]:
            raise ValueError(f"reward_preprocessor returned {out.shape[0]} rewards for {reward.shape[0]}")
        chunk.set_flat("reward", out)


def nonfinite_steps(chunk: Chunk, keys=("obs", "next_obs", "reward")) -> Tuple[Optional[torch.Tensor], str]:
    """``[N, T]`` kept steps with a NaN or inf in ``keys`` (None when there are none) and where they are."""
    bad = None
    where = []
    for key in keys:
        if key not in chunk.data or not chunk.data[key].is_floating_point():
            continue
        x = chunk.logical(key)
        if math.isfinite(float(x.sum())):  # a finite sum: every value is finite (one op, the usual case)
            continue
        finite = torch.isfinite(x).reshape(chunk.n, chunk.t, -1).all(2)
        rows = ~finite & chunk.kept
        if bool(rows.any()):
            where.append(f"{key!r} at rows {rows.any(1).nonzero().squeeze(1).tolist()}")
            bad = rows if bad is None else bad | rows
    return bad, " and ".join(where)
