"""The seed types -> the rollout record: `step_to_record` and its parts (layout in `rlightning.types.record`).

    record = step_to_record(env_ret_t, policy_resp_t, env_ret_t1, env_meta=meta)   # [N]

A single unbatched env (an observation of the space's own shape, a scalar reward, bool flags) gives one row.
Values of the wrong kind raise TypeError and shapes that do not fit raise ValueError, naming the argument.
torch and tensordict are imported on first use.
"""

from __future__ import annotations

import warnings
from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np

from rlightning.types.convert import to_numpy
from rlightning.types.env_types import EnvMeta, EnvRet
from rlightning.types.record_keys import (
    ACTION,
    DONE,
    ENV_ID,
    EPISODE_ID,
    NEXT,
    NEXT_DONE,
    NEXT_REWARD,
    NEXT_TERMINATED,
    NEXT_TRUNCATED,
    NEXT_VALUE,
    OBS,
    REWARD,
    TERMINATED,
    TRUNCATED,
    VALID,
    VALUE,
    RecordKeyError,
    _name,
    _shape,
    key_tuple,
    space_spec,
)

__all__ = ["record_from_steps", "record_leaves", "response_arrays", "step_arrays", "step_to_record"]


def _array(value: Any, what: str) -> np.ndarray:
    """A numeric ndarray from an array-like, or a TypeError naming ``what``."""
    if value is None or isinstance(value, (str, bytes, dict)):
        raise TypeError(f"{what} must be an array or a number, got {type(value).__name__} {_short(value)}")
    try:
        arr = np.asarray(to_numpy(value))
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what} must be an array or a number, got {type(value).__name__} {_short(value)}") from err
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{what} must hold real numbers or booleans, got dtype {arr.dtype} {_short(value)}")
    return arr


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _obs_leaves(observation: Any, space: Any, prefix: Tuple[str, ...] = (OBS,)) -> Dict[Tuple[str, ...], np.ndarray]:
    subspaces = getattr(space, "spaces", None) if space is not None else None
    if isinstance(observation, Mapping):
        if space is not None and not isinstance(subspaces, Mapping):
            raise TypeError(
                f"env_ret.observation is a dict (keys {sorted(map(str, observation))}) but the observation space "
                f"is {space!r}; a dict observation needs a Dict space"
            )
        out: Dict[Tuple[str, ...], np.ndarray] = {}
        for k, v in observation.items():
            sub = subspaces.get(k) if isinstance(subspaces, Mapping) else None
            out.update(_obs_leaves(v, sub, prefix + (str(k),)))
        return out
    if isinstance(subspaces, Mapping):
        raise TypeError(
            f"env_ret.observation must be a dict with keys {sorted(map(str, subspaces))} for the space {space!r}, "
            f"got {type(observation).__name__}"
        )
    return {prefix: _array(observation, "env_ret.observation" + "".join(f"[{p!r}]" for p in prefix[1:]))}


def _batch_obs(
    leaves: Dict[Tuple[str, ...], np.ndarray], space: Any, num_envs: Optional[int], env_id: str
) -> Tuple[Dict[Tuple[str, ...], np.ndarray], int, bool]:
    """(observation leaves ``[N, ...]``, N, single): ``single`` when the env is one unbatched env."""
    want = space_spec(space)
    single = False
    if want is not None and set(want) == set(leaves) and num_envs in (None, 1):
        single = all(leaves[k].shape == want[k][0] for k in want)
    elif want is None and all(a.ndim == 0 for a in leaves.values()):
        single = True
    elif want is None and num_envs == 1 and any(a.ndim == 0 or a.shape[0] != 1 for a in leaves.values()):
        single = True
    if single:
        leaves = {k: a[None] for k, a in leaves.items()}
    n = None
    for k, a in leaves.items():
        if a.ndim == 0:
            raise ValueError(f"env {env_id!r}: observation {_name(k)!r} is a scalar; expected [num_envs, ...]")
        if n is None:
            n = a.shape[0]
        elif a.shape[0] != n:
            raise ValueError(f"env {env_id!r}: observation leaves have different leading dims ({n} and {a.shape[0]})")
    if n is None:
        raise ValueError(f"env {env_id!r}: the observation is empty")
    if num_envs is not None and n != num_envs:
        raise ValueError(
            f"env {env_id!r}: observation has shape {_shape(next(iter(leaves.values())).shape)}, expected a leading "
            f"dimension of num_envs={num_envs} (or the space's own shape for a single env)"
        )
    if want is not None:
        for k, (shape, dtype) in want.items():
            a = leaves.get(k)
            if a is None or tuple(a.shape[1:]) != shape or a.dtype != dtype:
                got = "missing" if a is None else f"shape {_shape(a.shape)} and dtype {a.dtype}"
                raise ValueError(
                    f"env {env_id!r}: observation {_name(k)!r} has {got}, expected shape ({n}, "
                    f"{', '.join(map(str, shape))}) and dtype {dtype} ([num_envs, *observation_space.shape])"
                )
    return leaves, n, single


def _per_row(value: Any, n: int, dtype: Any, what: str, env_id: str) -> np.ndarray:
    arr = _array(value, what)
    if np.dtype(dtype) == np.bool_ and arr.dtype.kind != "b" and not np.isin(arr, (0, 1)).all():
        raise ValueError(f"env {env_id!r}: {what} must be booleans (or 0 and 1), got {arr.reshape(-1)[:8].tolist()}")
    if arr.ndim == 0:
        return np.full(n, arr, dtype=dtype)
    flat = arr.reshape(-1)
    if flat.shape[0] != n:
        raise ValueError(
            f"env {env_id!r}: {what} has shape {_shape(arr.shape)}, expected one value per sub-environment ({n},)"
        )
    return flat.astype(dtype, copy=False)


def _resp_rows(value: np.ndarray, n: int, single: bool, space_shape: Optional[Tuple[int, ...]], what: str, env_id: str):
    if single:
        if space_shape is not None and value.shape == space_shape:
            return value[None]
        if space_shape is not None and value.shape == (1,) + space_shape:
            return value
        if space_shape is None and (value.ndim == 0 or value.shape[0] != 1):
            return value[None]
    if value.ndim == 0 or value.shape[0] != n:
        raise ValueError(
            f"env {env_id!r}: {what} has shape {_shape(value.shape)}, expected a leading dimension of num_envs={n}"
            + ("" if not single else " or the action space's own shape for a single env")
        )
    return value


def step_arrays(
    env_ret: Any, policy_resp: Any = None, env_meta: Optional[EnvMeta] = None, *, arg: str = "env_ret"
) -> Dict[Any, np.ndarray]:
    """One seed step as arrays with a leading row dimension ``N``.

    Returns ``obs`` leaves (keyed ``("obs", ...)``), ``reward``, ``terminated``, ``truncated`` (the
    previous action's, from the EnvRet) and, when ``policy_resp`` is given, ``action`` and every
    numeric extra of the response. A single unbatched env (an observation of the space's own shape,
    a scalar reward, bool flags; ``num_envs`` None or 1) gives N = 1.

    Raises:
        TypeError: ``env_ret`` is not an EnvRet, the response is not a PolicyResponse-like object,
            or a value of the wrong kind (None, a string, an object array, a dict for a Box space);
            a multi-agent EnvRet (those are stored as whole multi-agent records).
        ValueError: shapes that do not fit N or the space, env ids that differ.
    """
    if not isinstance(env_ret, EnvRet):
        raise TypeError(f"{arg} must be an EnvRet, got {type(env_ret).__name__} {_short(env_ret)}")
    env_id = env_ret.env_id
    if isinstance(env_ret.last_reward, Mapping):
        raise TypeError(
            f"{arg} of env {env_id!r} is multi-agent (rewards per agent); multi-agent steps are stored as whole "
            "rollout records nested per agent (Storage.add_rollout, cluster.inference='env_workers'; see "
            "rlightning.types.multi_agent_record), not one EnvRet at a time"
        )
    space = env_meta.observation_space if env_meta is not None else None
    num_envs = env_meta.num_envs if env_meta is not None else None
    leaves, n, single = _batch_obs(_obs_leaves(env_ret.observation, space), space, num_envs, env_id)
    out: Dict[Any, np.ndarray] = dict(leaves)
    out[REWARD] = _per_row(env_ret.last_reward, n, np.float32, f"{arg}.last_reward", env_id)
    out[TERMINATED] = _per_row(env_ret.last_terminated, n, np.bool_, f"{arg}.last_terminated", env_id)
    out[TRUNCATED] = _per_row(env_ret.last_truncated, n, np.bool_, f"{arg}.last_truncated", env_id)
    if policy_resp is None:
        return out
    out.update(response_arrays(policy_resp, env_id, n, single, env_meta))
    return out


def response_arrays(
    policy_resp: Any, env_id: str, n: int, single: bool = False, env_meta: Optional[EnvMeta] = None
) -> Dict[str, np.ndarray]:
    """``action`` and the numeric extras of a PolicyResponse, each ``[n, ...]`` (see `step_arrays`)."""
    from rlightning.types.policy_types import PolicyResponse

    if not isinstance(policy_resp, PolicyResponse):
        raise TypeError(f"policy_resp must be a PolicyResponse, got {type(policy_resp).__name__} {_short(policy_resp)}")
    if policy_resp.env_id != env_id:
        raise ValueError(
            f"PolicyResponse for env {policy_resp.env_id!r} cannot be paired with the EnvRet of env {env_id!r}"
        )
    data = policy_resp.to_dict()
    if ACTION not in data:
        raise RecordKeyError(f"PolicyResponse for env {env_id!r} has no 'action'; it has {sorted(data)}")
    act_space = env_meta.action_space if env_meta is not None else None
    act_shape = tuple(act_space.shape) if getattr(act_space, "shape", None) is not None else None
    out: Dict[str, np.ndarray] = {}
    for key, value in data.items():
        if key in (OBS, REWARD, TERMINATED, TRUNCATED, DONE, VALID, EPISODE_ID, NEXT):
            raise ValueError(f"PolicyResponse key {key!r} of env {env_id!r} clashes with a record key; rename it")
        if key != ACTION and not isinstance(value, (np.ndarray, int, float, bool, np.number, np.bool_)):
            if type(value).__name__ != "Tensor":
                continue  # non-numeric extras (strings, dicts, ...) are not stored
        arr = _array(value, f"policy_resp.{key}")
        out[key] = _resp_rows(arr, n, single, act_shape if key == ACTION else None, f"policy_resp.{key}", env_id)
    return out


def record_leaves(
    step: Mapping[Any, np.ndarray],
    next_step: Mapping[Any, np.ndarray],
    episode_id: Any = None,
    valid: Any = None,
) -> Tuple[int, Dict[Tuple[str, ...], Any]]:
    """The converter's core: the ``[N]`` record of one step as ``(N, {record key: tensor})``.

    ``step`` holds the observation the action was chosen on and the action with its extras;
    ``next_step`` the next observation and the reward and flags of that action (and, when it
    has ``value``, the value of the next observation, kept as ``next.value``). ``valid``
    defaults to "the row was not done at ``step``". Arrays are shared, not copied.
    """
    import torch

    def tensor(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return a
        a = np.ascontiguousarray(a)
        if not a.flags.writeable:  # e.g. read from Ray's object store: shared, only ever read (stores copy it)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                return torch.from_numpy(a)
        return torch.from_numpy(a)

    out: Dict[Tuple[str, ...], Any] = {}
    n = None
    for k, v in step.items():
        if k in (REWARD, TERMINATED, TRUNCATED):
            continue
        t = tensor(v)
        key = key_tuple(k)
        out[key] = t
        if key[0] == OBS and n is None:
            n = int(t.shape[0])
    for k, v in next_step.items():
        key = key_tuple(k)
        if key[0] == OBS:
            out[(NEXT,) + key] = tensor(v)
    if n is None:
        raise RecordKeyError(f"the step has no observation (keys {sorted(map(str, step))})")
    term = tensor(np.asarray(next_step[TERMINATED], dtype=bool))
    trunc = tensor(np.asarray(next_step[TRUNCATED], dtype=bool))
    if valid is None:
        valid = ~(np.asarray(step[TERMINATED], dtype=bool) | np.asarray(step[TRUNCATED], dtype=bool))
    out[NEXT_REWARD] = tensor(np.asarray(next_step[REWARD], dtype=np.float32))
    out[NEXT_TERMINATED] = term
    out[NEXT_TRUNCATED] = trunc
    out[NEXT_DONE] = term | trunc
    if VALUE in next_step:
        out[NEXT_VALUE] = tensor(np.asarray(next_step[VALUE])).reshape(n, -1)[:, 0].to(torch.float32)
    out[(VALID,)] = tensor(np.asarray(valid, dtype=bool).reshape(n))
    ids = np.zeros(n, np.int64) if episode_id is None else np.asarray(episode_id, dtype=np.int64).reshape(n)
    out[(EPISODE_ID,)] = tensor(ids)
    return n, out


def record_from_steps(
    step: Mapping[Any, np.ndarray],
    next_step: Mapping[Any, np.ndarray],
    env_id: str,
    episode_id: Any = None,
    valid: Any = None,
) -> Any:
    """Build the ``[N]`` record TensorDict of one step from two step dicts (see `record_leaves`)."""
    from tensordict import TensorDict

    n, leaves = record_leaves(step, next_step, episode_id, valid)
    td = TensorDict({}, batch_size=[n])
    for k, v in leaves.items():
        td.set(k, v)
    td.set_non_tensor(ENV_ID, env_id)
    return td


def step_to_record(
    env_ret: EnvRet,
    policy_resp: Any,
    next_env_ret: EnvRet,
    *,
    env_meta: Optional[EnvMeta] = None,
    next_policy_resp: Any = None,
    episode_id: Any = None,
) -> Any:
    """The one converter from the seed types: (EnvRet_t, PolicyResponse_t, EnvRet_t+1) -> ``[N]`` record.

    Args:
        env_ret: The EnvRet the action was chosen on.
        policy_resp: The response answering it.
        next_env_ret: The env's next EnvRet (next observation, the action's reward and flags).
        env_meta: The env's metadata (observation space and num_envs check and batch the data).
        next_policy_resp: The response answering ``next_env_ret``; its ``value`` becomes ``next.value``.
        episode_id: ``[N]`` episode counters of the rows (default 0).

    Raises:
        TypeError: an argument of the wrong kind (naming it).
        ValueError: shapes, dtypes or env ids that do not fit.
    """
    step = step_arrays(env_ret, policy_resp, env_meta, arg="env_ret")
    nxt = step_arrays(next_env_ret, None, env_meta, arg="next_env_ret")
    if next_env_ret.env_id != env_ret.env_id:
        raise ValueError(f"next_env_ret is from env {next_env_ret.env_id!r}, env_ret from {env_ret.env_id!r}")
    n = step[REWARD].shape[0]
    if nxt[REWARD].shape[0] != n:
        raise ValueError(f"next_env_ret has {nxt[REWARD].shape[0]} rows, env_ret {n}")
    if next_policy_resp is not None:
        extra = response_arrays(next_policy_resp, env_ret.env_id, n, n == 1, env_meta)
        if VALUE in extra:
            nxt[VALUE] = extra[VALUE]
    return record_from_steps(step, nxt, env_ret.env_id, episode_id)
