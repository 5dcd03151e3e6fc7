"""Small helpers shared by the policy classes: optimizers, env metadata checks, coroutines."""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from typing import Any, Iterable, Optional

import torch

from rlightning.types import EnvMeta
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)


def build_optimizer(
    optim_cfg: Any, params: Iterable[torch.nn.Parameter], lr: Optional[float] = None, fused: bool = False
):
    """Build the torch optimizer an `OptimConfig` names.

    Args:
        optim_cfg: An `OptimConfig` (``name``, ``lr``, ``eps``, ``weight_decay``).
        params: Parameters to optimise.
        lr: Learning rate overriding ``optim_cfg.lr`` (critic rates, ...).
        fused: Adam/AdamW through torch's fused kernel (the same update up to float rounding) where the
            parameters' device has one; torch's default implementation elsewhere.

    Raises:
        ValueError: an optimizer name that is not adam, adamw or sgd, or no parameters.
    """
    params = [p for p in params if p.requires_grad]
    if not params:
        raise ValueError("setup_optimizer found no trainable parameters; build the networks first")
    rate = float(optim_cfg.lr if lr is None else lr)
    name = optim_cfg.name
    if name in ("adam", "adamw"):
        cls = torch.optim.Adam if name == "adam" else torch.optim.AdamW
        kwargs = {"lr": rate, "eps": optim_cfg.eps, "weight_decay": optim_cfg.weight_decay}
        if fused:
            try:
                return cls(params, fused=True, **kwargs)
            except (RuntimeError, ValueError, TypeError) as err:  # a device without the fused kernel
                logger.debug("fused %s unavailable (%s); using torch's default", cls.__name__, err)
        return cls(params, **kwargs)
    if name == "sgd":
        return torch.optim.SGD(params, lr=rate, weight_decay=optim_cfg.weight_decay)
    raise ValueError(f"optim.name={name!r} is not supported; use one of adam, adamw, sgd")


def check_env_meta(env_meta: Any, policy_name: str) -> EnvMeta:
    """Check that ``env_meta`` is an `EnvMeta` with both spaces set.

    Raises:
        TypeError: not an `EnvMeta`.
        ValueError: a space is missing.
    """
    if not isinstance(env_meta, EnvMeta):
        raise TypeError(f"{policy_name}.construct_network(env_meta) needs an EnvMeta, got {type(env_meta).__name__}")
    for name in ("observation_space", "action_space"):
        if getattr(env_meta, name) is None:
            raise ValueError(
                f"{policy_name}.construct_network: env_meta.{name} is None for env {env_meta.env_id!r}; "
                "the env group must report both spaces"
            )
    return env_meta


def run_coroutine(value: Any) -> Any:
    """Return ``value``, awaiting it first when it is a coroutine (an ``async def`` rollout_step).

    Works with or without a running event loop in this thread (in a notebook or
    an async Ray actor the coroutine runs on a helper thread with its own loop).
    """
    if not inspect.isawaitable(value):
        return value

    async def _await() -> Any:
        return await value

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, _await()).result()
