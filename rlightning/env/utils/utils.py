"""Small env helpers: the default action preprocess function and env ids."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from rlightning.types import PolicyResponse

_UNSAFE_ID_CHARS = re.compile(r"[:/\\\s]+")


def default_env_preprocess_fn(policy_resp: PolicyResponse) -> Any:
    """Turn a `PolicyResponse` into the env's action: its ``action`` attribute, as numpy.

    Torch tensors are moved to numpy; a dict of actions (multi-agent) is converted per agent.

    Args:
        policy_resp: The response answering the env's last `EnvRet`.

    Returns:
        The batched action, ``[num_envs, *act_shape]`` (a dict of those for multi-agent envs).

    Raises:
        AttributeError: the response has no ``action``.
    """
    try:
        action = policy_resp.action
    except AttributeError:
        raise AttributeError(
            f"PolicyResponse for env {getattr(policy_resp, 'env_id', None)!r} has no 'action' attribute; "
            f"it has {sorted(vars(policy_resp))}"
        ) from None
    return _to_numpy(action)


def _to_numpy(action: Any) -> Any:
    if isinstance(action, np.ndarray):
        return action
    if isinstance(action, dict):
        return {k: _to_numpy(v) for k, v in action.items()}
    if hasattr(action, "detach") and hasattr(action, "cpu"):  # a torch tensor, without importing torch
        return action.detach().cpu().numpy()
    return np.asarray(action)


def make_env_id(name: str, worker_index: int) -> str:
    """The id of env worker ``worker_index`` of env ``name``: ``f"{name}-{worker_index}"``.

    Characters that would break ids used as paths or keys (``:``, ``/``, ``\\``, spaces) become ``.``,
    so an entry point ``pkg.mod:MyEnv`` gives ``pkg.mod.MyEnv-0``.
    """
    return f"{_UNSAFE_ID_CHARS.sub('.', str(name))}-{int(worker_index)}"
