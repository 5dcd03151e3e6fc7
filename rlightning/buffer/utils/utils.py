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
    """
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
        KeyError: the response has no ``action``.
    """
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
        ValueError: the response answers another env, or its keys clash with the env keys.
    """
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
    """Generalised advantage estimates for one episode.

    ``delta`` is computed for all steps at once; the backward recursion runs
    over plain floats, which is fast for the few hundred steps of an episode.

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
    reward = np.asarray(reward, dtype=np.float64).reshape(-1)
    value = np.asarray(value, dtype=np.float64).reshape(-1)
    not_term = 1.0 - np.asarray(terminated, dtype=np.float64).reshape(-1)
    next_value = np.empty_like(value)
    next_value[:-1] = value[1:]
    if value.shape[0]:
        next_value[-1] = bootstrap_value
    delta = reward + gamma * next_value * not_term - value
    coef = (gamma * gae_lambda * not_term).tolist()
    adv = [0.0] * len(coef)
    running = 0.0
    for t in range(len(coef) - 1, -1, -1):
        running = delta[t] + coef[t] * running
        adv[t] = running
    return np.asarray(adv, dtype=np.float32)


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
    """Picklable GAE postprocess (see `make_gae_postprocess_fn`)."""

    def __init__(self, gamma: float, gae_lambda: float) -> None:
        self.gamma = gamma
        self.gae_lambda = gae_lambda

    def __call__(self, episode: TensorDict, bootstrap_value: Optional[Any] = None) -> TensorDict:
        if "value" not in episode.keys():
            raise KeyError(
                f"GAE needs a 'value' key in the episode (the PolicyResponse extras); it has {sorted(episode.keys())}"
            )
        value = episode["value"].reshape(-1)
        terminated = episode["terminated"].reshape(-1)
        boot = 0.0
        if bootstrap_value is not None and not bool(terminated[-1]):
            boot = float(to_numpy(bootstrap_value).reshape(-1)[0])
        adv = gae(
            episode["reward"].cpu().numpy(),
            value.cpu().numpy(),
            terminated.cpu().numpy(),
            boot,
            self.gamma,
            self.gae_lambda,
        )
        adv_t = torch.from_numpy(adv).to(value.device)
        episode.set("advantage", adv_t)
        episode.set("return", adv_t + value.to(torch.float32))
        return episode

    def batched(self, episodes: TensorDict, lengths: torch.Tensor, bootstrap_value: Optional[Any]) -> TensorDict:
        """GAE for several episodes concatenated along the batch dimension, in one backward pass.

        Args:
            episodes: ``[sum(lengths)]`` concatenated episodes.
            lengths: ``[E]`` episode lengths.
            bootstrap_value: ``[E]`` values after each episode's last step (None: 0).
        """
        if "value" not in episodes.keys():
            raise KeyError(
                f"GAE needs a 'value' key in the episode (the PolicyResponse extras); it has {sorted(episodes.keys())}"
            )
        value_t = episodes["value"].reshape(-1)
        value = value_t.cpu().numpy().astype(np.float64)
        reward = episodes["reward"].reshape(-1).cpu().numpy().astype(np.float64)
        not_term = 1.0 - episodes["terminated"].reshape(-1).cpu().numpy().astype(np.float64)
        ends = np.cumsum(to_numpy(lengths).astype(np.int64)) - 1
        next_value = np.empty_like(value)
        next_value[:-1] = value[1:]
        boot = np.zeros(len(ends)) if bootstrap_value is None else to_numpy(bootstrap_value).astype(np.float64)
        next_value[ends] = boot.reshape(-1)
        delta = reward + self.gamma * next_value * not_term - value
        coef = self.gamma * self.gae_lambda * not_term
        coef[ends] = 0.0
        delta_l, coef_l = delta.tolist(), coef.tolist()
        adv = [0.0] * len(coef_l)
        running = 0.0
        for t in range(len(coef_l) - 1, -1, -1):
            running = delta_l[t] + coef_l[t] * running
            adv[t] = running
        adv_t = torch.tensor(adv, dtype=torch.float32, device=value_t.device)
        episodes.set("advantage", adv_t)
        episodes.set("return", adv_t + value_t.to(torch.float32))
        return episodes

    def __repr__(self) -> str:
        return f"gae_postprocess(gamma={self.gamma}, gae_lambda={self.gae_lambda})"
