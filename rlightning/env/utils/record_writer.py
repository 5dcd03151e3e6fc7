"""`RecordWriter`: one rollout of an env worker written step by step into preallocated arrays.

The arrays are numpy (one assignment per key per step, no torch call on the
hot path); they travel as they are (out of band through Ray) and become the
``[N, T]`` record TensorDict where it is read, without a copy
(`arrays_to_record`, ``torch.from_numpy``). Observations live in one ``[N, T + 1, ...]``
array: ``obs`` is its ``[:, :T]`` view and ``next.obs`` its ``[:, 1:]`` view,
so each observation is copied into the record once. Record keys (see the
record format): ``obs``, ``action`` and the policy's extras at the root,
``episode_id``, ``valid``, and ``next.{obs, reward, terminated, truncated,
done}``; the env worker's id as non-tensor ``env_id``.

Torch and tensordict are imported only by `arrays_to_record`: an env worker
never imports them for its rollouts.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping, Optional

import numpy as np

from rlightning.env.utils.episodes import EpisodeIds, done_mask


def _alloc(example: Any, num_envs: int, steps: int, what: str) -> Any:
    """``[num_envs, steps, ...]`` arrays shaped like one ``[num_envs, ...]`` value (dicts: per key)."""
    if isinstance(example, Mapping):
        return {k: _alloc(v, num_envs, steps, f"{what}.{k}") for k, v in example.items()}
    arr = np.asarray(example)
    if arr.dtype == object:
        raise TypeError(f"{what} has dtype object; a record holds numeric or bool arrays only")
    if arr.ndim == 0 or arr.shape[0] != num_envs:
        raise ValueError(f"{what} has shape {arr.shape}; expected a leading dimension of num_envs={num_envs}")
    return np.empty((num_envs, steps) + arr.shape[1:], dtype=arr.dtype)


def _write(buf: Any, t: int, value: Any, what: str) -> None:
    if isinstance(buf, dict):
        if not isinstance(value, Mapping) or value.keys() != buf.keys():
            got = sorted(value) if isinstance(value, Mapping) else type(value).__name__
            raise ValueError(f"{what} changed structure: expected keys {sorted(buf)}, got {got}")
        for k, sub in buf.items():
            _write(sub, t, value[k], f"{what}.{k}")
        return
    try:
        buf[:, t] = value
    except (ValueError, TypeError) as err:
        raise ValueError(
            f"{what} of shape {np.shape(value)} does not fit the record's [num_envs, ...] = "
            f"{(buf.shape[0],) + buf.shape[2:]}: {err}"
        ) from None


def _to_torch(buf: Any, sl: slice) -> Any:
    import torch

    if isinstance(buf, dict):
        return {k: _to_torch(v, sl) for k, v in buf.items()}
    return (buf if isinstance(buf, torch.Tensor) else torch.from_numpy(buf))[:, sl]  # tensors: a device env's


def _tensor(value: Any) -> Any:
    import torch

    return value if isinstance(value, torch.Tensor) else torch.from_numpy(value)


class RecordWriter:
    """Arrays of one ``[N, T]`` rollout, filled by `write_step`.

    Args:
        env_id: The env worker's id (named in errors and stored in the record).
        num_envs: N.
        num_steps: T.
        first_obs: The observation the first action is chosen on (``[N, ...]``, or a dict of those).
        start_done: Done flags ``[N]`` of the EnvRet that observation came with (those rows autoreset on
            the first step, which is then not valid).

    Raises:
        TypeError, ValueError: an observation without a leading dimension N, or of dtype object.
    """

    def __init__(self, env_id: str, num_envs: int, num_steps: int, first_obs: Any, start_done: np.ndarray) -> None:
        self.env_id = env_id
        self.num_envs = int(num_envs)
        self.num_steps = int(num_steps)
        n, t = self.num_envs, self.num_steps
        self.obs = _alloc(first_obs, n, t + 1, f"env {env_id}: observation")
        _write(self.obs, 0, first_obs, f"env {env_id}: observation")
        self.reward = np.empty((n, t), dtype=np.float32)
        self.terminated = np.empty((n, t), dtype=bool)
        self.truncated = np.empty((n, t), dtype=bool)
        self.start_done = np.asarray(start_done, dtype=bool).reshape(n)
        self.extras: Optional[Dict[str, np.ndarray]] = None

    def _alloc_extras(self, out: Mapping[str, Any]) -> Dict[str, np.ndarray]:
        if "action" not in out:
            raise KeyError(f"env {self.env_id}: the policy returned no 'action' (keys: {sorted(out)})")
        extras = {}
        for key, value in out.items():
            extras[key] = _alloc(value, self.num_envs, self.num_steps, f"env {self.env_id}: policy output {key!r}")
        return extras

    def write_step(self, t: int, out: Mapping[str, Any], next_obs: Any, reward: Any, terminated: Any, truncated: Any):
        """Step ``t``: the policy's outputs (``action`` and extras) and what the env returned for them."""
        extras = self.extras
        if extras is None:
            extras = self.extras = self._alloc_extras(out)
        try:
            for key, buf in extras.items():
                buf[:, t] = out[key]
        except KeyError as err:
            raise KeyError(
                f"env {self.env_id}: the policy stopped returning {err.args[0]!r} at step {t} (first step: "
                f"{sorted(extras)})"
            ) from None
        except (ValueError, TypeError):
            for key, buf in extras.items():
                _write(buf, t, out[key], f"env {self.env_id}: policy output {key!r}")
            raise
        if type(next_obs) is np.ndarray and type(self.obs) is np.ndarray:
            try:
                self.obs[:, t + 1] = next_obs
            except ValueError:
                _write(self.obs, t + 1, next_obs, f"env {self.env_id}: observation")
        else:
            _write(self.obs, t + 1, next_obs, f"env {self.env_id}: observation")
        self.reward[:, t] = reward
        self.terminated[:, t] = terminated
        self.truncated[:, t] = truncated

    def write_ret(self, t: int, out: Mapping[str, Any], env_ret: Any) -> None:
        """Step ``t``: the policy's outputs and the EnvRet the env answered them with (`write_step`)."""
        self.write_step(
            t, out, env_ret.observation, env_ret.last_reward, env_ret.last_terminated, env_ret.last_truncated
        )

    def fill_values(self, value_fn: Callable[[np.ndarray], Any], steps: int) -> np.ndarray:
        """Set the ``value`` extra of the first ``steps`` steps to ``value_fn`` of their observations, in one call.

        ``value_fn`` takes ``[rows, ...]`` observations and returns ``[rows]`` values (a policy's
        ``compute_values``); it is asked about the ``N * (steps + 1)`` observations at once, the last step's
        next observation included. Returns the values of those next observations ``[N]`` (the bootstraps).

        Raises:
            ValueError: ``value_fn`` returned another number of values.
        """
        n, t = self.num_envs, int(steps)
        obs = self.obs[:, : t + 1]
        value = np.asarray(value_fn(obs.reshape((n * (t + 1),) + obs.shape[2:])), dtype=np.float32)
        if value.size != n * (t + 1):
            raise ValueError(
                f"env {self.env_id}: the policy's compute_values returned {value.size} values for {n * (t + 1)} "
                "observations"
            )
        value = value.reshape(n, t + 1)
        if self.extras is not None:
            self.extras["value"] = value
        return value[:, t]

    def finish(self, episodes: EpisodeIds, steps: Optional[int] = None, last_value: Any = None) -> Dict[str, Any]:
        """The rollout's arrays (default: all T steps), episode ids taken from ``episodes``; see `arrays_to_record`.

        ``obs`` is the ``[N, steps + 1, ...]`` array (the first ``steps`` are ``obs``, the last ``steps``
        ``next.obs``); every other entry is ``[N, steps, ...]``.
        """
        t = self.num_steps if steps is None else int(steps)
        done = np.logical_or(self.terminated[:, :t], self.truncated[:, :t])
        valid = np.empty((self.num_envs, t), dtype=bool)
        if t:
            valid[:, 0] = ~self.start_done
            valid[:, 1:] = ~done[:, :-1]
        out: Dict[str, Any] = {k: v[:, :t] for k, v in (self.extras or {}).items()}
        out["obs"] = _cut(self.obs, t + 1)
        out["episode_id"] = episodes.assign(valid)
        out["valid"] = valid
        out["reward"] = self.reward[:, :t]
        out["terminated"] = self.terminated[:, :t]
        out["truncated"] = self.truncated[:, :t]
        out["done"] = done
        value = (self.extras or {}).get("value")
        if value is not None and t and value.shape[2:] in ((), (1,)):
            # next.value: the value of next.obs (the bootstrap of an episode cut at that step) is the value
            # the policy gave the next step's observation; the last step's comes from ``last_value``.
            nv = np.zeros((self.num_envs, t), dtype=np.float32)
            nv[:, :-1] = value[:, 1:t].reshape(self.num_envs, t - 1)
            if last_value is not None:
                nv[:, -1] = np.asarray(last_value, dtype=np.float32).reshape(self.num_envs)
            else:  # a rollout cut short (an env error): its own value stands in for the unknown next one
                nv[:, -1] = value[:, t - 1].reshape(self.num_envs)
            out["next_value"] = nv
        return out


def _cut(buf: Any, t: int) -> Any:
    if isinstance(buf, dict):
        return {k: _cut(v, t) for k, v in buf.items()}
    return buf[:, :t]


_NEXT_KEYS = ("reward", "terminated", "truncated", "done")


def arrays_to_record(arrays: Dict[str, Any], env_id: str) -> Any:
    """The ``[N, T]`` record TensorDict over the arrays of `RecordWriter.finish`, without a copy.

    ``obs`` and ``next.obs`` are views of the one observation array. Arrays that arrived read-only
    (zero-copy from the Ray object store) stay so: a record is read, not written.
    """
    import warnings

    from tensordict import TensorDict

    if "agents" in arrays:  # a multi-agent rollout (MultiAgentRecordWriter)
        from rlightning.types.multi_agent_record import multi_agent_arrays_to_record

        return multi_agent_arrays_to_record(arrays, env_id)
    obs = arrays["obs"]
    first = obs
    while isinstance(first, dict):
        first = next(iter(first.values()))
    n, t = first.shape[0], first.shape[1] - 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only arrays from the object store
        root: Dict[str, Any] = {
            k: _tensor(v) for k, v in arrays.items() if k not in ("obs", "next_value") and k not in _NEXT_KEYS
        }
        root["obs"] = _to_torch(obs, slice(0, t))
        root["next"] = {k: _tensor(arrays[k]) for k in _NEXT_KEYS}
        if "next_value" in arrays:
            root["next"]["value"] = _tensor(arrays["next_value"])
        root["next"]["obs"] = _to_torch(obs, slice(1, t + 1))
    td = TensorDict(root, batch_size=[n, t])
    td.set_non_tensor("env_id", env_id)
    return td


def start_done_flags(env_ret: Any) -> np.ndarray:
    """Done flags ``[N]`` of an `EnvRet` (rows that autoreset on the next step)."""
    return np.asarray(done_mask(env_ret.last_terminated, env_ret.last_truncated), dtype=bool).reshape(-1)
