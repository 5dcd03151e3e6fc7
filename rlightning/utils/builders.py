"""Builder utilities for constructing RL components.

Factory functions for the main components of a run: data buffers, env
groups, policy groups and engines (the public API of seed 004), and
`build_run`, which validates a whole `MainConfig` before any actor starts and
then builds all four in order.
"""

from __future__ import annotations

from typing import Any, Dict, NamedTuple

from rlightning.buffer import DataBuffer
from rlightning.buffer.builder import build_data_buffer
from rlightning.engine import BaseEngine
from rlightning.env.builder import build_env_group, define_env_instance_cfgs
from rlightning.env.env_group import EnvGroup
from rlightning.policy.builder import build_policy_group, create_distributed_policy_class
from rlightning.policy.policy_group import PolicyGroup
from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.placement import Placement
from rlightning.utils.registry import BUFFERS, ENGINE, POLICIES
from rlightning.utils.validate import acting_cluster, validate_config

logger = get_logger(__name__)

__all__ = [
    "Placement",
    "RunParts",
    "build_data_buffer",
    "build_engine",
    "build_env_group",
    "build_policy_group",
    "build_run",
    "create_distributed_policy_class",
    "define_env_instance_cfgs",
]


def build_engine(config: MainConfig, env_group: EnvGroup, policy_group: PolicyGroup, buffer: DataBuffer) -> BaseEngine:
    """Build the engine named by ``config.engine``.

    Args:
        config: Main config.
        env_group: Env group.
        policy_group: Policy group.
        buffer: Data buffer.

    Returns:
        BaseEngine: the engine instance, wired and ready to ``step()``.
    """
    engine_cls = ENGINE.get(config.engine)
    engine = engine_cls(config=config, env_group=env_group, policy_group=policy_group, buffer=buffer)
    from rlightning.env.worker_slot import resolve_env_class

    extend = getattr(resolve_env_class(config.env), "extend_engine", None)
    if extend is not None:  # an env backend's driver-side part (a turn-based game's league)
        extend(engine)
    return engine


class RunParts(NamedTuple):
    """What `build_run` returns."""

    env_group: EnvGroup
    policy_group: PolicyGroup
    buffer: DataBuffer
    engine: BaseEngine


def build_run(config: MainConfig, **buffer_fns: Any) -> RunParts:
    """Validate ``config`` (before any actor starts) and build all parts where ``config.cluster`` places them.

    The run's `Placement` (``Placement.from_cluster_config(config.cluster)``) is passed to each builder;
    `InternalFlag` is neither read nor changed, so runs built one after another in one process with
    different placements do not affect each other.

    Args:
        config: The run's config.
        **buffer_fns: Optional pre/post-process functions for ``build_data_buffer``.
    """
    validate_config(config)
    placement = Placement.from_cluster_config(config.cluster)
    from rlightning.policy.multi_agent import policy_class_for

    policy_cls = policy_class_for(config)  # MultiAgentPolicy for a multi-agent env
    fns: Dict[str, Any] = dict(buffer_fns)
    post = getattr(policy_cls, "buffer_postprocess_fn", None)
    if "postprocess_fn" not in fns and post is not None:
        chosen = post(config.policy)
        if chosen is not None:
            fns["postprocess_fn"] = chosen
    BUFFERS.get(config.buffer.type)
    built = []
    try:
        env_group = build_env_group(config.env, placement=placement)
        built.append(env_group)
        cluster = acting_cluster(config)  # env workers that act need no eval worker
        policy_group = build_policy_group(
            config.policy.type if policy_cls is POLICIES.get(config.policy.type) else policy_cls,
            config.policy,
            cluster,
            backend=_backend(config),
            placement=placement,
        )
        built.append(policy_group)
        buffer = build_data_buffer(config.buffer.type, config.buffer, placement=placement, **fns)
        built.append(buffer)
        engine = build_engine(config, env_group, policy_group, buffer)
    except BaseException:
        for part in reversed(built):
            try:
                part.close()
            except Exception as err:  # noqa: BLE001 - clean up what was started
                logger.warning("cleanup of %s failed: %s", type(part).__name__, err)
        raise
    return RunParts(env_group, policy_group, buffer, engine)


def _backend(config: MainConfig) -> str:
    return "nccl" if config.cluster.backend in ("auto", "nccl") else "gloo"
