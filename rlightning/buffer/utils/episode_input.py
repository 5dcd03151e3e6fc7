"""Inputs that do not arrive as (EnvRet, PolicyResponse) pairs: async halves and whole episodes."""

from __future__ import annotations

from collections import deque
from typing import Any, Deque, Dict, List, Optional, Set, Tuple

import numpy as np
import torch

from rlightning.types import EnvRet, PolicyResponse
from rlightning.utils.logger import get_logger

__all__ = ["AsyncPairer", "episode_to_transitions"]

logger = get_logger(__name__)


def _ts(item: Any) -> Optional[int]:
    ts = getattr(item, "ts_env_sent_ns", None)
    return int(ts) if isinstance(ts, (int, np.integer)) and not isinstance(ts, bool) else None


def _take(queue: Optional[Deque], ts: Optional[int], what: str, env_id: str) -> Any:
    """Pop the first queued item matching ``ts`` (any item when either side has no stamp)."""
    if not queue:
        return None
    for k, item in enumerate(queue):
        its = _ts(item)
        if ts is None or its is None or its == ts:
            if k:
                logger.warning("env %r: dropping %d unpaired %s older than the matched one", env_id, k, what)
            for _ in range(k):
                queue.popleft()
            return queue.popleft()
    return None


class AsyncPairer:
    """Pairs EnvRets and PolicyResponses that arrive separately, per env, by ``ts_env_sent_ns``."""

    def __init__(self) -> None:
        self._env: Dict[str, Deque[EnvRet]] = {}
        self._resp: Dict[str, Deque[PolicyResponse]] = {}

    def env_ids(self) -> Set[str]:
        """Envs with items seen (pending or not)."""
        return set(self._env) | set(self._resp)

    def pending(self) -> int:
        """Unpaired items held."""
        return sum(len(q) for q in self._env.values()) + sum(len(q) for q in self._resp.values())

    def push(self, item: Any) -> List[Tuple[EnvRet, PolicyResponse]]:
        """Add one half; return the pairs it completes (zero or one).

        Raises:
            TypeError: an item that is neither an EnvRet nor a PolicyResponse.
        """
        if isinstance(item, EnvRet):
            env_id = item.env_id
            self._resp.setdefault(env_id, deque())
            match = _take(self._resp[env_id], _ts(item), "PolicyResponses", env_id)
            if match is None:
                self._env.setdefault(env_id, deque()).append(item)
                return []
            return [(item, match)]
        if isinstance(item, PolicyResponse):
            env_id = item.env_id
            self._env.setdefault(env_id, deque())
            match = _take(self._env[env_id], _ts(item), "EnvRets", env_id)
            if match is None:
                self._resp.setdefault(env_id, deque()).append(item)
                return []
            return [(match, item)]
        raise TypeError(f"add_data_async expects an EnvRet or a PolicyResponse, got {type(item).__name__}")


def _tensor(key: str, value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.is_complex():
            raise TypeError(f"add_episode: key {key!r} has dtype {value.dtype}; expected real numbers or booleans")
        return value
    if value is None or isinstance(value, (str, bytes, dict)):
        raise TypeError(f"add_episode: key {key!r} must be an array, got {type(value).__name__}")
    arr = np.asarray(value) if not isinstance(value, np.ndarray) else value
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"add_episode: key {key!r} must hold real numbers or booleans, got dtype {arr.dtype}")
    return torch.from_numpy(np.ascontiguousarray(arr))


def episode_to_transitions(
    episode: Any, num_envs: int = 1, bootstrap_value: Optional[Any] = None
) -> Tuple[Dict[str, torch.Tensor], np.ndarray, Optional[np.ndarray]]:
    """Flatten ``[T, num_envs, ...]`` episode arrays into concatenated single-env episodes.

    Returns:
        (transitions ``[sum(lengths), ...]``, episode lengths, bootstrap value per episode or None).

    Raises:
        TypeError: not a dict or TensorDict, or a value that is not an array of numbers.
        KeyError: ``obs`` missing.
        ValueError: shapes that do not match ``[T, num_envs]``.
    """
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise ValueError(f"add_episode num_envs must be a positive integer, got {num_envs!r}")
    if hasattr(episode, "batch_size") and hasattr(episode, "items"):
        raw = {k: v for k, v in episode.items()}
    elif isinstance(episode, dict):
        raw = dict(episode)
    else:
        raise TypeError(f"add_episode expects a dict or a TensorDict, got {type(episode).__name__}")
    if "obs" not in raw:
        raise KeyError(f"add_episode needs key 'obs'; the episode has {sorted(raw)}")
    data = {k: _tensor(k, v) for k, v in raw.items()}
    ref_key = next((k for k in ("reward", "terminated", "truncated", "done") if k in data), None)
    ref = data[ref_key] if ref_key is not None else None
    if ref is not None and ref.ndim == 0:
        raise ValueError(f"add_episode: {ref_key!r} must have a time dimension, got a scalar")
    obs = data["obs"]
    if obs.ndim == 0:
        raise ValueError("add_episode: 'obs' must have a time dimension, got a scalar")
    if num_envs == 1:
        single = ref.ndim == 1 if ref is not None else (obs.ndim < 2 or obs.shape[1] != 1)
        if single:
            data = {k: v.unsqueeze(1) if v.ndim >= 1 else v for k, v in data.items()}
    obs = data["obs"]
    if ref_key is not None:
        t_len = data[ref_key].shape[0]
    else:
        t_len = obs.shape[0] if "next_obs" in data else obs.shape[0] - 1
    if t_len <= 0:
        raise ValueError(f"add_episode: the episode is empty ({t_len} steps)")
    if "reward" in data:
        data["reward"] = data["reward"].reshape(t_len, -1).to(torch.float32)
    if "next_obs" not in data:
        if obs.shape[0] != t_len + 1:
            raise ValueError(
                f"add_episode needs 'next_obs', or T + 1 = {t_len + 1} observations (the last is the final one); "
                f"got {obs.shape[0]} observations for {t_len} steps"
            )
        data["obs"], data["next_obs"] = obs[:-1], obs[1:]
    if "terminated" not in data:
        data["terminated"] = data["done"] if "done" in data else torch.zeros(t_len, num_envs, dtype=torch.bool)
    if "truncated" not in data:
        data["truncated"] = torch.zeros(t_len, num_envs, dtype=torch.bool)
    for k in ("terminated", "truncated"):
        data[k] = data[k].reshape(t_len, -1).to(torch.bool).clone()  # never write into the caller's tensors
    data["truncated"][-1] |= ~data["terminated"][-1]
    data["done"] = data["terminated"] | data["truncated"]
    for k, v in data.items():
        if v.ndim < 2 or tuple(v.shape[:2]) != (t_len, num_envs):
            raise ValueError(
                f"add_episode: key {k!r} has shape {tuple(v.shape)}, expected [T={t_len}, num_envs={num_envs}, ...]"
            )
    flat = {}
    for k, v in data.items():
        v = v.transpose(0, 1).reshape((num_envs * t_len,) + tuple(v.shape[2:]))
        flat[k] = v.reshape(-1) if k in ("reward", "terminated", "truncated", "done") else v
    ends = np.flatnonzero(flat["done"].cpu().numpy())
    lengths = np.diff(np.concatenate([[-1], ends])).astype(np.int64)
    boot = None
    if bootstrap_value is not None:
        b = np.asarray(
            bootstrap_value.detach().cpu().numpy() if isinstance(bootstrap_value, torch.Tensor) else bootstrap_value,
            dtype=np.float32,
        ).reshape(-1)
        if b.shape[0] != num_envs:
            raise ValueError(f"add_episode bootstrap_value needs {num_envs} values (one per env), got {b.shape[0]}")
        boot = np.zeros(lengths.shape[0], dtype=np.float32)
        column_end = (ends % t_len) == t_len - 1
        boot[column_end] = b
    return flat, lengths, boot
