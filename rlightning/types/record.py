"""The rollout record: one TensorDict per vector step ``[N]`` or chunk ``[N, T]``, and its checks.

    record = step_to_record(env_ret_t, policy_resp_t, env_ret_t1, env_meta=meta)   # [N]
    spec = validate_record(record, observation_space=meta.observation_space)

Layout (tensordict's ``next`` convention):

- root: ``obs`` (the observation the action was chosen on; dict observation
  spaces are nested keys), ``action``, the policy's extras (``log_prob``,
  ``value``, ...), ``episode_id`` (int64, per row) and ``valid`` (bool: False
  on the autoreset steps of gymnasium's NEXT_STEP convention, which storages
  never store);
- ``next``: ``obs``, ``reward`` (float32), ``terminated``, ``truncated`` and
  ``done`` (bool, ``done = terminated | truncated``); optionally ``value``,
  the value of ``next.obs`` (a bootstrap for episodes that end at that step);
- the env worker's id as non-tensor data: ``record.set_non_tensor("env_id", ...)``.

Multi-agent records nest the per-agent data under ``agents.<agent_id>`` (and
``next.agents.<agent_id>``), with a per-agent ``valid`` mask; see
`rlightning.types.multi_agent_record`. Observations keep their dtype. torch and tensordict are imported on first
use: `EnvRet` users that never build a record do not pay for them.

This module holds the checks; the key names live in `rlightning.types.record_keys` and the builder from the seed
types in `rlightning.types.record_build` (both re-exported here).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

from rlightning.types.multi_agent_record import (
    MULTI_AGENT_RECORD_KEYS,
    check_multi_agent_record,
    is_multi_agent_record,
)
from rlightning.types.record_build import (
    record_from_steps,
    record_leaves,
    response_arrays,
    step_arrays,
    step_to_record,
)
from rlightning.types.record_keys import (
    ACTION,
    DONE,
    ENV_ID,
    EPISODE_ID,
    FLAG_KEYS,
    NEXT,
    NEXT_DONE,
    NEXT_OBS,
    NEXT_REWARD,
    NEXT_TERMINATED,
    NEXT_TRUNCATED,
    NEXT_VALUE,
    OBS,
    RECORD_KEYS,
    REWARD,
    TERMINATED,
    TRUNCATED,
    VALID,
    VALUE,
    RecordKeyError,
    Spec,
    _name,
    _shape,
    key_tuple,
    space_spec,
)

__all__ = [
    "ACTION",
    "DONE",
    "ENV_ID",
    "EPISODE_ID",
    "FLAG_KEYS",
    "NEXT",
    "NEXT_DONE",
    "NEXT_OBS",
    "NEXT_REWARD",
    "NEXT_TERMINATED",
    "NEXT_TRUNCATED",
    "NEXT_VALUE",
    "OBS",
    "RECORD_KEYS",
    "REWARD",
    "RecordKeyError",
    "TERMINATED",
    "TRUNCATED",
    "VALID",
    "VALUE",
    "record_env_id",
    "record_from_steps",
    "record_leaves",
    "response_arrays",
    "space_spec",
    "step_arrays",
    "step_to_record",
    "validate_record",
    "key_tuple",
]


# ---------------------------------------------------------------------- validation


def _torch_dtype_name(dtype: Any) -> str:
    return str(dtype).replace("torch.", "")


def record_env_id(td: Any) -> Optional[str]:
    """The record's ``env_id`` (non-tensor data), or None when it has none."""
    if ENV_ID not in td.keys():
        return None
    try:
        value = td.get_non_tensor(ENV_ID)
    except Exception:  # noqa: BLE001 - a tensor under env_id is reported by validate_record
        return None
    return value if isinstance(value, str) else None


def read_leaves(td: Any) -> Dict[Tuple[str, ...], Any]:
    """A TensorDict record's leaves as ``{key tuple: value}`` (non-tensor data such as ``env_id`` left out)."""
    return {key_tuple(k): td.get(k) for k in td.keys(include_nested=True, leaves_only=True)}


def validate_record(
    td: Any,
    *,
    num_envs: Optional[int] = None,
    observation_space: Any = None,
    spec: Optional[Spec] = None,
    require: Sequence[Any] = RECORD_KEYS,
    require_env_id: bool = False,
    name: str = "record",
    leaves: Optional[Dict[Tuple[str, ...], Any]] = None,
) -> Spec:
    """Check a rollout record before anything of it is stored.

    Args:
        td: The record, a TensorDict ``[N]`` or ``[N, T]``.
        num_envs: Expected N (None: any).
        observation_space: The env's observation space (checks ``obs`` and ``next.obs`` leaves).
        spec: A spec returned for an earlier record of the same stream: keys, per-row shapes and
            dtypes must match it.
        require: Keys that must be present.
        require_env_id: The record must carry ``env_id`` as a string.
        name: What to call the record in messages (e.g. the argument's name).
        leaves: The record's leaves already read (`read_leaves` of ``td``), so that they are read once.

    Returns:
        The record's spec: ``{key: (per-row shape, dtype)}`` of every tensor leaf.

    Raises:
        TypeError: not a TensorDict, a leaf that is not a tensor, or a non-string ``env_id``.
        RecordKeyError: a required key is missing (a KeyError and a ValueError).
        ValueError: wrong batch dims, shapes, dtypes, inconsistent flags, or a mismatch with
            ``spec`` / ``observation_space`` (naming the key, what it is and what was expected).
    """
    import torch
    from tensordict import TensorDictBase

    if not isinstance(td, TensorDictBase):
        raise TypeError(
            f"{name} must be a tensordict.TensorDict with batch dims [N] or [N, T], got {type(td).__name__}"
        )
    bdims = td.batch_dims
    if bdims not in (1, 2):
        raise ValueError(
            f"{name} must have batch dims [N] (one vector step) or [N, T] (a chunk), got batch_size "
            f"{list(td.batch_size)}"
        )
    batch = tuple(td.batch_size)
    if num_envs is not None and batch[0] != num_envs:
        raise ValueError(f"{name} has {batch[0]} rows (batch_size {list(batch)}), expected num_envs={num_envs}")
    if require_env_id and record_env_id(td) is None:
        raise TypeError(f"{name} needs the env worker's id as a string: record.set_non_tensor('env_id', '<env id>')")
    if leaves is None:
        leaves = read_leaves(td)
    present = set(leaves)
    multi = is_multi_agent_record(td)  # agents.<id>.* (rlightning.types.multi_agent_record)
    if multi and require is RECORD_KEYS:
        require = MULTI_AGENT_RECORD_KEYS
    for key in require:
        k = key_tuple(key)
        if not any(p[: len(k)] == k for p in present):
            raise RecordKeyError(
                f"{name} has no {_name(key)!r} key (it has {sorted(_name(k) for k in present)}); a record needs "
                f"{[_name(k) for k in require]}"
            )
    out: Spec = {}
    for key in sorted(present):
        value = leaves[key]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} key {_name(key)!r} must be a tensor, got {type(value).__name__}")
        if value.is_complex():
            raise ValueError(
                f"{name} key {_name(key)!r} has dtype {_torch_dtype_name(value.dtype)}; complex values are not stored"
            )
        out[key] = (tuple(value.shape[bdims:]), value.dtype)
    _check_fixed(td, out, batch, name)
    _check_obs(td, out, present, None if multi else observation_space, name)
    if multi:
        check_multi_agent_record(td, out, observation_space, name)
    if spec is not None:
        _check_spec(out, spec, name)
    return out


def _check_fixed(td: Any, out: Spec, batch: Tuple[int, ...], name: str) -> None:
    import torch

    fixed = {
        NEXT_REWARD: (torch.float32,),
        NEXT_TERMINATED: (torch.bool,),
        NEXT_TRUNCATED: (torch.bool,),
        NEXT_DONE: (torch.bool,),
        (VALID,): (torch.bool,),
        (EPISODE_ID,): (torch.int64,),
        NEXT_VALUE: (torch.float32, torch.float64),
    }
    for key, dtypes in fixed.items():
        key = key_tuple(key)
        if key not in out:
            continue
        shape, dtype = out[key]
        if shape != () and not (key == NEXT_VALUE and shape == (1,)):
            raise ValueError(
                f"{name} key {_name(key)!r} has shape {_shape(batch + shape)}, expected {_shape(batch)} "
                "(one value per row and step)"
            )
        if dtype not in dtypes:
            raise ValueError(
                f"{name} key {_name(key)!r} has dtype {_torch_dtype_name(dtype)}, expected "
                f"{' or '.join(_torch_dtype_name(d) for d in dtypes)}"
            )
    if all(k in out for k in FLAG_KEYS):
        done = td.get(NEXT_DONE)
        if not torch.equal(done, td.get(NEXT_TERMINATED) | td.get(NEXT_TRUNCATED)):
            raise ValueError(f"{name} key 'next.done' must equal next.terminated | next.truncated")


def _check_obs(td: Any, out: Spec, present: set, space: Any, name: str) -> None:
    import torch

    obs_keys = sorted(k for k in present if k[0] == OBS)
    for key in obs_keys:
        nkey = (NEXT,) + key
        if nkey in out and out[nkey] != out[key]:
            (s1, d1), (s2, d2) = out[key], out[nkey]
            raise ValueError(
                f"{name} key {_name(nkey)!r} has per-row shape {_shape(s2)} and dtype {_torch_dtype_name(d2)}, "
                f"expected those of {_name(key)!r}: {_shape(s1)} and {_torch_dtype_name(d1)}"
            )
    want = space_spec(space)
    if want is None:
        return
    got = {k: v for k, v in out.items() if k[0] == OBS}
    if set(got) != set(want):
        raise ValueError(
            f"{name} observation keys {sorted(_name(k) for k in got)} do not match the observation space "
            f"{space!r} (keys {sorted(_name(k) for k in want)})"
        )
    for key, (shape, np_dtype) in want.items():
        torch_dtype = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype
        g_shape, g_dtype = got[key]
        if g_shape != shape or g_dtype != torch_dtype:
            raise ValueError(
                f"{name} key {_name(key)!r} has per-row shape {_shape(g_shape)} and dtype "
                f"{_torch_dtype_name(g_dtype)}, expected shape {_shape(shape)} and dtype {np_dtype} "
                "(the observation space's)"
            )


def _check_spec(out: Spec, spec: Spec, name: str) -> None:
    if out.keys() != spec.keys():
        missing = sorted(_name(k) for k in set(spec) - set(out))
        extra = sorted(_name(k) for k in set(out) - set(spec))
        raise ValueError(f"{name} keys differ from the stored ones: missing {missing}, unexpected {extra}")
    for key, (shape, dtype) in out.items():
        w_shape, w_dtype = spec[key]
        if shape != w_shape or dtype != w_dtype:
            raise ValueError(
                f"{name} key {_name(key)!r} has per-row shape {_shape(shape)} and dtype {_torch_dtype_name(dtype)}, "
                f"expected {_shape(w_shape)} and {_torch_dtype_name(w_dtype)} (as stored before)"
            )
