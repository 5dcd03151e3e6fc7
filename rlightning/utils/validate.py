"""Checks that the parts of a `MainConfig` fit together, run before any actor starts.

Every problem raises a `rlightning.utils.config.ConfigError` (a ``ValueError``);
an unregistered engine, policy, buffer or env backend raises its subclass
`UnknownNameError`, which is also a ``KeyError``.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from rlightning.utils.config import ClusterConfig, ConfigError, MainConfig, UnknownNameError
from rlightning.utils.optional import missing_logger_message, missing_loggers
from rlightning.utils.registry import BUFFERS, ENGINE, ENVS, POLICIES


def action_kind(space: Any) -> str:
    """``"discrete"``, ``"multi_discrete"``, ``"multi_binary"`` or ``"continuous"`` (else the space's class name)."""
    import gymnasium as gym

    if isinstance(space, gym.spaces.Discrete):
        return "discrete"
    if isinstance(space, gym.spaces.MultiDiscrete):
        return "multi_discrete"
    if isinstance(space, gym.spaces.MultiBinary):
        return "multi_binary"
    if isinstance(space, gym.spaces.Box):
        return "continuous"
    return type(space).__name__


def probe_spaces(config: MainConfig) -> Tuple[Optional[Any], Optional[Any]]:
    """The observation and action spaces of a gymnasium env (an id or a ``module:Class`` entry point) with its
    ``env.wrappers``, found by building one env in the driver before any worker starts; ``(None, None)`` for
    another backend.

    Raises:
        MissingSuiteError: the env's suite (Atari, MinAtar, MuJoCo, ...) is not installed; the message names
            the extra to install.
        ConfigError: env kwargs the env rejects.
    """
    if config.env.backend != "gymnasium":
        return None, None
    import gymnasium as gym

    from rlightning.env.gym_env import resolve_env_spec
    from rlightning.env.suites import ensure_suite
    from rlightning.env.wrappers import apply_wrappers, resolve_wrappers

    ensure_suite(config.env.name)  # a suite's missing package fails here, with its install hint
    if config.env.name not in gym.registry and ":" not in config.env.name:
        return None, None  # a BaseEnv registered in ENVS by that name (the env group resolves it)
    spec = resolve_env_spec(config.env.name)  # an entry point that does not import fails here, named
    try:
        env = gym.make(spec.id, **config.env.env_kwargs)
    except (TypeError, ValueError) as err:
        raise ConfigError(
            f"env {config.env.name!r} cannot be built with env.env_kwargs={config.env.env_kwargs!r:.200}: {err}"
        ) from None
    try:
        env = apply_wrappers(env, resolve_wrappers(config.env.wrappers))
        return env.observation_space, env.action_space
    finally:
        env.close()


def _check_spaces(config: MainConfig, policy_cls: type) -> None:
    """The policy can act in the env's action space, and an ``action_mask`` observation key fits it."""
    supported = getattr(policy_cls, "supported_action_spaces", None)
    obs_space, space = probe_spaces(config)
    if space is None:
        return
    kind = action_kind(space)
    if supported and kind not in supported:
        raise ValueError(
            f"policy {config.policy.type!r} supports {', '.join(supported)} actions, but env "
            f"{config.env.name!r} has a {kind} action space {space}; choose a policy for {kind} actions"
        )
    mask_space = _mask_space(obs_space)
    if mask_space is None:
        return
    if kind not in ("discrete", "multi_discrete"):
        raise ValueError(
            f"env {config.env.name!r} gives an 'action_mask' observation, which masks Discrete and MultiDiscrete "
            f"actions; its action space is {space} ({kind}); remove the mask or use a discrete action space"
        )
    import numpy as np

    width = int(space.n) if kind == "discrete" else int(np.sum(space.nvec))
    if int(np.prod(mask_space.shape)) != width:
        raise ValueError(
            f"env {config.env.name!r}: its 'action_mask' observation {mask_space} has {int(np.prod(mask_space.shape))} "
            f"entries, the action space {space} needs {width} (one per choice; MultiDiscrete: sum(nvec))"
        )


def _mask_space(obs_space: Any) -> Optional[Any]:
    from rlightning.policy.networks.masks import ACTION_MASK

    spaces = getattr(obs_space, "spaces", None)
    return spaces.get(ACTION_MASK) if isinstance(spaces, dict) else None


def acting_cluster(config: MainConfig) -> ClusterConfig:
    """The cluster config the policy group is built from.

    With ``cluster.inference="env_workers"`` the env workers act with their own policy copies, so no eval
    worker would ever act: ``eval_worker_num`` counts as 0 (evaluation episodes are played by train
    worker 0). The eval engine never acts in env workers and keeps its eval workers.
    """
    cluster = config.cluster
    if cluster.inference == "env_workers" and config.engine != "eval" and cluster.eval_worker_num:
        return cluster.model_copy(update={"eval_worker_num": 0})
    return cluster


def _check_multi_agent(config: MainConfig) -> None:
    from rlightning.policy.multi_agent import (
        MultiAgentPolicy,
        env_is_multi_agent,
        probe_agent_ids,
        resolve_agent_groups,
    )

    groups = getattr(config.policy, "agent_groups", None)
    if not env_is_multi_agent(config.env):
        if groups is not None:
            raise ValueError(
                f"policy.agent_groups maps agents of a multi-agent env to policies, but env {config.env.name!r} "
                f"(backend {config.env.backend!r}) is single-agent; remove policy.agent_groups"
            )
        return
    if config.cluster.inference != "env_workers" and config.engine != "eval":
        raise ValueError(
            f"multi-agent env {config.env.name!r} trains with cluster.inference='env_workers' (each env worker acts "
            f"for all its agents and writes per-agent records), got {config.cluster.inference!r}"
        )
    MultiAgentPolicy.buffer_postprocess_fn(config.policy)  # an algorithm without a per-agent postprocess raises
    resolve_agent_groups(groups, probe_agent_ids(config.env))


def validate_config(config: MainConfig) -> None:
    """Raise a clear error when the config's parts cannot work together.

    Raises:
        UnknownNameError: an engine, policy, buffer or env backend that is not registered
            (a `ConfigError` and a ``KeyError``).
        ConfigError: not a `MainConfig`, env kwargs the env rejects, a policy that cannot act in
            the env's action space, or a batch that does not fit in what one iteration collects
            or the buffer holds.
    """
    if not isinstance(config, MainConfig):
        raise ConfigError(f"validate_config needs a MainConfig, got {type(config).__name__}")
    try:
        _check(config)
    except ConfigError:
        raise
    except KeyError as err:
        raise UnknownNameError(err.args[0] if err.args else str(err)) from None
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _check(config: MainConfig) -> None:
    ENGINE.get(config.engine)
    policy_cls = POLICIES.get(config.policy.type)
    BUFFERS.get(config.buffer.type)
    for field in missing_loggers(config.log):  # log.tensorboard=true without tensorboard: the extra to install
        raise ConfigError(missing_logger_message(field))
    if config.env.backend != "gymnasium":
        ENVS.get(config.env.backend)

    _check_spaces(config, policy_cls)

    buf = config.buffer
    if buf.burn_in and (buf.unit != "episode" or buf.slice_len is None):
        raise ValueError(
            f"buffer.burn_in={buf.burn_in} warms up a recurrent state before fixed-length slices: it needs "
            f"buffer.unit='episode' and a buffer.slice_len (got unit={buf.unit!r}, slice_len={buf.slice_len!r})"
        )
    check_run = getattr(policy_cls, "check_run_config", None)  # the policy's own cross-section rules
    if callable(check_run):
        check_run(config)
    _check_multi_agent(config)

    beta = getattr(config.policy, "priority_beta_start", None)
    if config.buffer.sampler == "prioritized" and beta is not None and beta != config.buffer.priority_beta:
        raise ValueError(
            f"policy.priority_beta_start={beta} differs from buffer.priority_beta={config.buffer.priority_beta}: "
            "the learner rescales the sampler's importance weights from that exponent; set both to the same value"
        )

    per_iteration = config.train.rollout_steps * config.env.num_envs * config.env.num_workers
    on_policy = config.buffer.type == "rollout"
    if config.engine == "asyncrl" and on_policy and not getattr(policy_cls, "corrects_policy_lag", False):
        raise ValueError(
            f"engine 'asyncrl' with buffer.type 'rollout' trains on data acted with stale weights, which policy "
            f"{config.policy.type!r} does not correct for; use policy.type=appo or impala (V-trace), "
            "buffer.type=replay (SAC, DQN) or engine=syncrl (PPO)"
        )
    if (
        config.cluster.inference == "env_workers"
        and config.engine == "asyncrl"
        and not getattr(policy_cls, "corrects_policy_lag", False)
    ):
        raise ValueError(
            "cluster.inference='env_workers' runs whole rollouts inside the env workers, which the syncrl engine "
            "drives; engine 'asyncrl' steps the envs one step at a time and needs cluster.inference='eval_workers' "
            "(except for policies that correct for stale weights: appo, impala)"
        )
    if on_policy:
        if config.buffer.sampler != "all" and config.train.batch_size > per_iteration:
            raise ValueError(
                f"train.batch_size={config.train.batch_size} is larger than one rollout "
                f"({config.train.rollout_steps} steps x {config.env.num_envs} envs x {config.env.num_workers} workers "
                f"= {per_iteration} transitions); lower the batch size or collect more per iteration"
            )
        if getattr(config.policy, "num_minibatches", 1) > per_iteration:
            raise ValueError(
                f"policy.num_minibatches={config.policy.num_minibatches} is larger than one rollout "
                f"({per_iteration} transitions)"
            )
        capacity = config.buffer.capacity * config.cluster.buffer_worker_num
        if config.buffer.unit == "transition" and capacity < per_iteration and config.buffer.mode == "standard":
            raise ValueError(
                f"buffer capacity {capacity} (capacity x buffer_worker_num) cannot hold one rollout of "
                f"{per_iteration} transitions in standard mode; raise buffer.capacity"
            )
    elif config.engine != "eval":
        capacity = config.buffer.capacity * config.cluster.buffer_worker_num
        if config.buffer.unit == "transition" and config.train.batch_size > capacity:
            raise ValueError(
                f"train.batch_size={config.train.batch_size} is larger than the buffer capacity {capacity}"
            )
    if config.cluster.train_worker_num > 1 and config.cluster.train_worker_num % config.cluster.buffer_worker_num:
        if config.cluster.buffer_worker_num % config.cluster.train_worker_num:
            raise ValueError(
                f"cluster.train_worker_num={config.cluster.train_worker_num} and buffer_worker_num="
                f"{config.cluster.buffer_worker_num} cannot be split evenly: one must divide the other"
            )
