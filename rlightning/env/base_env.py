"""`BaseEnv`: the interface of an env worker, local object or Ray actor alike.

An env worker is vectorised: it runs ``config.num_envs`` sub-environments and
answers every call with one `EnvRet` for all of them (contract 1):

- ``observation``: ``[num_envs, *obs_shape]`` (float32 for Box spaces),
- ``last_reward``: float32 ``[num_envs]``; ``last_terminated`` / ``last_truncated``: bool ``[num_envs]``,
- ``info["episode_return"]`` / ``info["episode_length"]``: ``[num_envs]`` running totals.

Sub-environments autoreset the gymnasium NEXT_STEP way (contract 2): a done
row carries the final observation; the next step ignores that row's action and
returns the reset observation with reward 0 and done False.

A subclass implements ``reset``, ``step``, ``get_metadata`` (and ``close`` if
it holds resources). Acting, rollouts and the policy copy are not the env's
business: a `RolloutWorker` holds the env and does them. Registered in ``ENVS`` it is chosen with
``EnvConfig.backend`` (or ``EnvConfig.name``), and runs inside a Ray actor
unchanged, even when it is defined in a notebook cell::

    @ENVS.register("counter")
    class CounterEnv(BaseEnv):
        ...
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, Optional

import numpy as np

from rlightning.env.errors import caller_error
from rlightning.env.utils.episodes import EpisodeTracker
from rlightning.env.utils.utils import default_env_preprocess_fn, make_env_id
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)


class BaseEnv(ABC):
    """An env worker of ``config.num_envs`` sub-environments.

    Args:
        config: The env config (name, kwargs, ``num_envs``, ...).
        worker_index: Global index of this worker in its group; makes ``env_id`` unique.
        preprocess_fn: Turns a `PolicyResponse` into the env's action
            (None: `default_env_preprocess_fn`).

    Raises:
        TypeError: ``config`` is not an `EnvConfig` or ``preprocess_fn`` is not callable.
        ValueError: ``worker_index`` is negative or ``config.num_envs`` is below 1.
    """

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
    ) -> None:
        if not isinstance(config, EnvConfig):
            raise TypeError(f"config must be an EnvConfig, got {type(config).__name__}")
        if isinstance(worker_index, bool) or not isinstance(worker_index, (int, np.integer)) or worker_index < 0:
            raise ValueError(f"worker_index must be an int >= 0, got {worker_index!r}")
        num_envs = config.num_envs
        if not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1 (sub-environments per worker), got {num_envs!r}")
        if preprocess_fn is None:
            preprocess_fn = default_env_preprocess_fn
        if not callable(preprocess_fn):
            raise TypeError(f"preprocess_fn must be callable (PolicyResponse -> action), got {preprocess_fn!r}")
        self.config = config
        self.worker_index = int(worker_index)
        self.num_envs = int(num_envs)
        self.env_id = make_env_id(config.name, self.worker_index)
        self.preprocess_fn = preprocess_fn
        self.episodes = EpisodeTracker(self.num_envs)

    # ------------------------------------------------------------------ to implement

    @classmethod
    def prepare(cls, config: EnvConfig) -> Dict[str, Any]:
        """Run in the driver before any worker of ``config`` is built.

        Validate the config and return extra constructor keyword arguments
        (resolved in the driver, so a registration made in a notebook reaches
        workers in other processes). Default: nothing.
        """
        return {}

    @abstractmethod
    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> EnvRet:
        """Reset every sub-environment, seeded from ``seed`` when given (gymnasium: sub-env ``j`` gets ``seed + j``)."""

    @abstractmethod
    def step(self, policy_resp: PolicyResponse) -> EnvRet:
        """Apply the batched action of ``policy_resp`` and return the next `EnvRet`."""

    @abstractmethod
    def get_metadata(self) -> EnvMeta:
        """The worker's `EnvMeta`: env id, single-env spaces and ``num_envs``."""

    def close(self) -> None:
        """Release the env's resources (default: nothing to release)."""
        logger.debug("closing %s", self.env_id)

    # ------------------------------------------------------------------ provided

    def get_env_id(self) -> str:
        """This worker's env id."""
        return self.env_id

    def ping(self) -> str:
        """Liveness probe: returns the env id."""
        return self.env_id

    def episode_stats(self) -> Dict[str, Any]:
        """Plain snapshot of this worker: env id, ``num_envs``, env steps and finished episodes."""
        out = {"env_id": self.env_id, "num_envs": self.num_envs}
        out.update(self.episodes.summary())
        return out

    def check_policy_resp(self, policy_resp: Any) -> None:
        """Raise if ``policy_resp`` is not a response meant for this worker.

        Its errors are marked as the caller's (`rlightning.env.errors.caller_error`): the group raises
        them at once instead of recreating the worker. A subclass marks its own input checks the same way;
        any other exception of ``step`` or ``reset`` counts as an env error and recreates the worker.

        Raises:
            TypeError: not a `PolicyResponse`.
            ValueError: its ``env_id`` names another env worker.
        """
        if not isinstance(policy_resp, PolicyResponse):
            raise caller_error(
                TypeError(f"env {self.env_id}: step() takes a PolicyResponse, got {type(policy_resp).__name__}")
            )
        resp_id = policy_resp.env_id
        if resp_id is not None and resp_id != self.env_id:
            raise caller_error(
                ValueError(
                    f"env {self.env_id}: got a PolicyResponse for env {resp_id!r}; a response must answer the "
                    "EnvRet of the same env_id"
                )
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env_id={self.env_id!r}, num_envs={self.num_envs})"
