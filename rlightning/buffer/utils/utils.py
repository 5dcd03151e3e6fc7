"""The default transition pipeline functions and the GAE post-process.

The pipeline a `Storage` runs for every (EnvRet, PolicyResponse) pair:

    step = preprocess_fn(env_ret, policy_resp,
                         obs_preprocessor=..., reward_preprocessor=...,
                         env_ret_preprocess_fn=..., policy_resp_preprocess_fn=...)

``step`` is a dict of numpy arrays with leading dimension ``num_envs``:
``obs``, ``reward``, ``terminated``, ``truncated`` (from the EnvRet; reward and
flags belong to the previous action) and ``action`` plus every extra of the
response (``log_prob``, ``value``, ...). The storage aligns the steps into
transitions; when an episode is finished it calls

    episode = postprocess_fn(episode, bootstrap_value=...)

on a TensorDict ``[T]`` holding ``obs``, ``action``, extras, ``reward``,
``next_obs``, ``terminated``, ``truncated``, ``done``. It returns the episode
with any keys added (GAE adds ``advantage`` and ``return``), same length.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np
import torch
from tensordict import TensorDict

from rlightning.buffer.utils.preprocessors import IdentityPreprocessor, to_numpy
from rlightning.types.record import RecordKeyError

__all__ = [
    "STEP_ENV_KEYS",
    "default_env_ret_preprocess_fn",
    "default_obs_preprocessor",
    "default_policy_resp_preprocess_fn",
    "default_postprocess_fn",
    "default_preprocess_fn",
    "default_reward_preprocessor",
    "gae",
    "make_gae_postprocess_fn",
    "run_postprocess",
]

#: Keys of a step dict that come from the EnvRet.
STEP_ENV_KEYS = ("obs", "reward", "terminated", "truncated")

#: Default observation preprocessor: observations are stored as they come.
default_obs_preprocessor = IdentityPreprocessor()

#: Default reward preprocessor: rewards are stored as float32.
default_reward_preprocessor = IdentityPreprocessor(dtype=np.float32)


def _rows(value: Any, num_envs: int, dtype: Any, name: str, env_id: str) -> np.ndarray:
    arr = to_numpy(value)
    if arr.dtype.kind not in "biuf":
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        raise ValueError(
            f"env {env_id!r}: {name} must hold real numbers, one per sub-environment; got {arr.dtype} {shown}"
        )
    if np.dtype(dtype) == np.bool_ and arr.dtype.kind != "b" and not np.isin(arr, (0, 1)).all():
        raise ValueError(f"env {env_id!r}: {name} must be booleans (or 0 and 1), got {arr.reshape(-1)[:8].tolist()}")
    if arr.ndim == 0:
        arr = np.full(num_envs, arr, dtype=dtype)
    else:
        arr = arr.reshape(-1)
        if arr.shape[0] != num_envs:
            raise ValueError(
                f"env {env_id!r}: {name} has {arr.shape[0]} entries, expected one per sub-environment ({num_envs})"
            )
        if arr.dtype != dtype:
            arr = arr.astype(dtype)
    return arr


_ENV_RET_FIELDS = ("env_id", "observation", "last_reward", "last_terminated", "last_truncated")


def _shown(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def check_env_ret(env_ret: Any, where: str, name: str = "env_ret") -> None:
    """Raise a TypeError naming ``name`` (an argument of ``where``) unless ``env_ret`` is EnvRet-like."""
    missing = [f for f in _ENV_RET_FIELDS if not hasattr(env_ret, f)]
    if missing:
        raise TypeError(f"{where}: {name} must be an EnvRet (with {', '.join(_ENV_RET_FIELDS)}), got {_shown(env_ret)}")


def check_policy_resp(policy_resp: Any, where: str, name: str = "policy_resp") -> None:
    """Raise a TypeError naming ``name`` (an argument of ``where``) unless ``policy_resp`` is a PolicyResponse-like
    object (a ``to_dict`` method or attributes)."""
    if policy_resp is None or isinstance(policy_resp, (str, bytes, int, float, bool, dict, list, tuple, np.ndarray)):
        raise TypeError(
            f"{where}: {name} must be a PolicyResponse (an object with an 'action' attribute), "
            f"got {_shown(policy_resp)}"
        )
    if not hasattr(policy_resp, "to_dict") and not hasattr(policy_resp, "__dict__"):
        raise TypeError(f"{where}: {name} must be a PolicyResponse, got {_shown(policy_resp)}")


def default_env_ret_preprocess_fn(
    env_ret: Any,
    obs_preprocessor: Optional[Callable] = default_obs_preprocessor,
    reward_preprocessor: Optional[Callable] = default_reward_preprocessor,
) -> Dict[str, np.ndarray]:
    """Turn an EnvRet into the env half of a step dict.

    Args:
        env_ret: A vectorised `EnvRet` (observation ``[num_envs, ...]``).
        obs_preprocessor: Applied to the observation batch (None: unchanged).
        reward_preprocessor: Applied to the reward batch (None: unchanged).

    Returns:
        ``obs``, ``reward`` (float32), ``terminated`` and ``truncated`` (bool), each ``[num_envs, ...]``.

    Raises:
        TypeError: ``env_ret`` is not an EnvRet (a string, None, ...).
    """
    check_env_ret(env_ret, "default_env_ret_preprocess_fn")
    obs = to_numpy(env_ret.observation)
    if obs.ndim == 0:
        obs = obs.reshape(1)
    num_envs = obs.shape[0]
    if obs_preprocessor is not None:
        obs = to_numpy(obs_preprocessor(obs))
    reward = _rows(env_ret.last_reward, num_envs, np.float32, "last_reward", env_ret.env_id)
    if reward_preprocessor is not None:
        reward = to_numpy(reward_preprocessor(reward)).astype(np.float32, copy=False).reshape(-1)
    return {
        "obs": obs,
        "reward": reward,
        "terminated": _rows(env_ret.last_terminated, num_envs, np.bool_, "last_terminated", env_ret.env_id),
        "truncated": _rows(env_ret.last_truncated, num_envs, np.bool_, "last_truncated", env_ret.env_id),
    }


def default_policy_resp_preprocess_fn(policy_resp: Any) -> Dict[str, np.ndarray]:
    """Turn a PolicyResponse into the policy half of a step dict.

    Every data attribute that is an array, a tensor or a number becomes a
    numpy array; ids, timestamps, ``weight_version`` and non-numeric values
    are left out.

    Raises:
        TypeError: ``policy_resp`` is not a PolicyResponse (a string, None, ...).
        KeyError: the response has no ``action``.
    """
    check_policy_resp(policy_resp, "default_policy_resp_preprocess_fn")
    data = policy_resp.to_dict() if hasattr(policy_resp, "to_dict") else dict(vars(policy_resp))
    if "action" not in data:
        raise KeyError(
            f"PolicyResponse for env {getattr(policy_resp, 'env_id', None)!r} has no 'action'; it has {sorted(data)}"
        )
    out: Dict[str, np.ndarray] = {}
    for key, value in data.items():
        if isinstance(value, (np.ndarray, torch.Tensor, int, float, bool, np.number, np.bool_, list, tuple)):
            arr = to_numpy(value)
            if arr.dtype.kind in "biuf":
                out[key] = arr
    return out


def default_preprocess_fn(
    env_ret: Any,
    policy_resp: Any,
    obs_preprocessor: Optional[Callable] = default_obs_preprocessor,
    reward_preprocessor: Optional[Callable] = default_reward_preprocessor,
    env_ret_preprocess_fn: Optional[Callable] = default_env_ret_preprocess_fn,
    policy_resp_preprocess_fn: Optional[Callable] = default_policy_resp_preprocess_fn,
) -> Dict[str, np.ndarray]:
    """Build one step dict from an EnvRet and the PolicyResponse that answers it.

    Raises:
        TypeError: ``env_ret`` is not an EnvRet, or ``policy_resp`` not a PolicyResponse.
        ValueError: the response answers another env, or its keys clash with the env keys.
    """
    check_env_ret(env_ret, "default_preprocess_fn")
    check_policy_resp(policy_resp, "default_preprocess_fn")
    if getattr(policy_resp, "env_id", env_ret.env_id) != env_ret.env_id:
        raise ValueError(
            f"PolicyResponse for env {policy_resp.env_id!r} cannot be paired with the EnvRet of env {env_ret.env_id!r}"
        )
    env_fn = env_ret_preprocess_fn or default_env_ret_preprocess_fn
    resp_fn = policy_resp_preprocess_fn or default_policy_resp_preprocess_fn
    step = env_fn(env_ret, obs_preprocessor, reward_preprocessor)
    policy_part = resp_fn(policy_resp)
    clash = sorted(set(step) & set(policy_part))
    if clash:
        raise ValueError(
            f"PolicyResponse keys {clash} clash with the env keys {sorted(step)} of env {env_ret.env_id!r}; rename them"
        )
    step.update(policy_part)
    return step


def default_postprocess_fn(episode: TensorDict, bootstrap_value: Optional[torch.Tensor] = None) -> TensorDict:
    """Return the finished episode unchanged (the storage already aligned it)."""
    return episode


default_postprocess_fn.reads = ()
default_postprocess_fn.writes = ()


def run_postprocess(
    fn: Callable, data: Dict[str, torch.Tensor], lengths: np.ndarray, bootstrap_value: Optional[np.ndarray]
) -> Dict[str, torch.Tensor]:
    """Apply a postprocess_fn to concatenated finished episodes.

    Uses ``fn.batched(episodes, lengths, bootstrap_value)`` when the function has
    it (GAE does: one pass for all episodes), else calls ``fn`` per episode.

    Raises:
        ValueError: the function changed the number of transitions.
    """
    n = int(lengths.sum())
    td = TensorDict._new_unsafe(data, batch_size=torch.Size([n]))
    boot = None if bootstrap_value is None else torch.from_numpy(bootstrap_value)
    if hasattr(fn, "batched"):
        td = fn.batched(td, torch.from_numpy(lengths), boot)
    else:
        parts = td.split(lengths.tolist())
        td = torch.cat([fn(p, bootstrap_value=None if boot is None else boot[e]) for e, p in enumerate(parts)])
    if td.batch_size[0] != n:
        raise ValueError(f"postprocess_fn {fn!r} returned {td.batch_size[0]} transitions for {n}; keep the length")
    return dict(td.items())


def gae(
    reward: np.ndarray,
    value: np.ndarray,
    terminated: np.ndarray,
    bootstrap_value: float,
    gamma: float,
    gae_lambda: float,
) -> np.ndarray:
    """Generalised advantage estimates for one episode (`rlightning.policy.returns.gae` on numpy arrays).

    Args:
        reward: ``[T]`` rewards.
        value: ``[T]`` value estimates of the observations.
        terminated: ``[T]`` terminal flags (a terminal step does not bootstrap).
        bootstrap_value: Value of the observation after the last step (ignored when it terminated).
        gamma: Discount factor.
        gae_lambda: GAE lambda.

    Returns:
        ``[T]`` float32 advantages.
    """
    from rlightning.policy.returns import gae as gae_fn

    value_t = torch.as_tensor(np.asarray(value, dtype=np.float64).reshape(-1))
    steps = value_t.shape[0]
    next_value = torch.empty_like(value_t)
    next_value[:-1] = value_t[1:]
    if steps:
        next_value[-1] = float(bootstrap_value)
    done = torch.zeros(steps, dtype=torch.bool)
    if steps:
        done[-1] = True
    reward_t = torch.as_tensor(np.asarray(reward, dtype=np.float64).reshape(-1))
    term_t = torch.as_tensor(np.asarray(terminated, dtype=np.float64).reshape(-1))
    adv, _ = gae_fn(reward_t, value_t, next_value, term_t, done, gamma, gae_lambda)
    return adv.numpy()


def make_gae_postprocess_fn(gamma: float, gae_lambda: float) -> Callable:
    """A postprocess_fn adding ``advantage`` and ``return`` (advantage + value) to finished episodes.

    The episode must carry ``reward`` and ``value``; ``bootstrap_value`` is the
    value of the observation after the last step (0 when the episode terminated
    or when it is not known).

    Raises:
        ValueError: gamma or gae_lambda outside [0, 1].
    """
    for name, v in (("gamma", gamma), ("gae_lambda", gae_lambda)):
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"make_gae_postprocess_fn {name} must be in [0, 1], got {v!r}")
    return _GAEPostprocess(float(gamma), float(gae_lambda))


class _GAEPostprocess:
    """Picklable GAE postprocess (see `make_gae_postprocess_fn`); the maths is `rlightning.policy.returns.gae`.

    ``reads`` / ``writes`` name the keys it uses and adds: a storage runs it on those keys only.
    """

    reads = ("reward", "value", "terminated")
    writes = ("advantage", "return")

    def __init__(self, gamma: float, gae_lambda: float) -> None:
        self.gamma = gamma
        self.gae_lambda = gae_lambda

    def __call__(self, episode: TensorDict, bootstrap_value: Optional[Any] = None) -> TensorDict:
        boot = None if bootstrap_value is None else torch.as_tensor(to_numpy(bootstrap_value)).reshape(-1)[:1]
        lengths = torch.tensor([episode.batch_size[0]])
        return self.batched(episode, lengths, boot)

    def batched(self, episodes: TensorDict, lengths: torch.Tensor, bootstrap_value: Optional[Any]) -> TensorDict:
        """GAE for several episodes concatenated along the batch dimension, in one backward pass.

        Args:
            episodes: ``[sum(lengths)]`` concatenated episodes.
            lengths: ``[E]`` episode lengths.
            bootstrap_value: ``[E]`` values after each episode's last step (None: 0).

        Raises:
            KeyError: the episodes lack ``value`` or ``reward``.
        """
        from rlightning.policy.returns import gae as gae_fn

        keys = set(episodes.keys())
        for key, where in (("value", "the PolicyResponse extras"), ("reward", "the EnvRet's last_reward")):
            if key not in keys:
                raise RecordKeyError(f"GAE needs a {key!r} key in the episode ({where}); it has {sorted(keys)}")
        value_t = episodes["value"].reshape(episodes.batch_size[0], -1)[:, 0]
        value = value_t.to(torch.float64).cpu()
        n = value.shape[0]
        ends = torch.cumsum(torch.as_tensor(to_numpy(lengths)).long(), 0) - 1
        next_value = torch.empty_like(value)
        next_value[:-1] = value[1:]
        if bootstrap_value is None:
            boot = torch.zeros(ends.shape[0], dtype=torch.float64)
        else:
            boot = torch.as_tensor(to_numpy(bootstrap_value)).to(torch.float64).reshape(-1)
        next_value[ends] = boot
        done = torch.zeros(n, dtype=torch.bool)
        done[ends] = True
        terminated = episodes["terminated"].reshape(n).cpu() if "terminated" in keys else torch.zeros(n)
        reward = episodes["reward"].reshape(n).cpu()
        adv, target = gae_fn(reward, value, next_value, terminated, done, self.gamma, self.gae_lambda)
        device = value_t.device
        episodes.set("advantage", adv.to(device))
        episodes.set("return", target.to(device))
        return episodes

    def __repr__(self) -> str:
        return f"gae_postprocess(gamma={self.gamma}, gae_lambda={self.gae_lambda})"
