"""Building a `PolicyGroup` from configs (seed 004; re-exported by ``rlightning.utils.builders``)."""

from __future__ import annotations

import functools
import time
import uuid
from typing import Any, Dict, List, Optional, Type, Union

from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.comm import BACKENDS
from rlightning.policy.policy_group import PolicyGroup
from rlightning.utils.config import ClusterConfig, PolicyConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.placement import Placement, resolve_placement
from rlightning.utils.ray.launcher import launch_ray_actor
from rlightning.utils.ray.remote_class import DistributedMixin
from rlightning.utils.registry import POLICIES

logger = get_logger(__name__)


def create_distributed_policy_class(policy_cls: type, role_type: PolicyRole) -> type:
    """Create a distributed policy class by mixing ``policy_cls`` with `DistributedMixin`."""
    return type(f"{policy_cls.__name__}_{role_type}", (policy_cls, DistributedMixin), {"_rl_distributed_wrapper": True})


def resolve_policy_class(policy_cls: Union[str, Type[BasePolicy]]) -> Type[BasePolicy]:
    """A registered policy name or a policy class -> the class.

    Raises:
        KeyError: an unregistered name (the registered ones are listed).
        TypeError: neither a name nor a `BasePolicy` subclass.
    """
    import rlightning.policy.algorithms  # noqa: F401 - registers the built-ins

    if isinstance(policy_cls, str):
        return POLICIES.get(policy_cls)
    if isinstance(policy_cls, type) and issubclass(policy_cls, BasePolicy):
        return policy_cls
    raise TypeError(f"policy_cls must be a registered name or a BasePolicy subclass, got {policy_cls!r}")


def check_gpu_request(cluster_cfg: ClusterConfig, placement: Optional[Placement] = None) -> Dict[str, float]:
    """Fail before launching anything when more GPUs are asked for than exist.

    Remote workers are compared with ``ray.cluster_resources()['GPU']``; local
    workers with the GPUs torch sees in this process. Which workers are remote:
    ``placement`` (None: as `InternalFlag` says).

    Returns:
        ``asked_remote``, ``available_remote``, ``asked_local``, ``available_local``.

    Raises:
        ValueError: naming what was asked for (and by whom) and what is available.
    """
    c = cluster_cfg
    p = resolve_placement("train", None, placement)
    train_gpus = c.train_worker_num * c.train_each_gpu_num
    eval_gpus = c.eval_worker_num * c.eval_each_gpu_num
    asked_remote = (train_gpus if p.remote_train else 0.0) + (eval_gpus if p.remote_eval else 0.0)
    asked_local = (0.0 if p.remote_train else train_gpus) + (0.0 if p.remote_eval else eval_gpus)
    detail = (
        f"train_worker_num={c.train_worker_num} x train_each_gpu_num={c.train_each_gpu_num} + "
        f"eval_worker_num={c.eval_worker_num} x eval_each_gpu_num={c.eval_each_gpu_num}"
    )
    out = {"asked_remote": asked_remote, "available_remote": 0.0, "asked_local": asked_local, "available_local": 0.0}
    if asked_remote > 0:
        import ray

        if not ray.is_initialized():
            raise RuntimeError("remote policy workers need Ray: start it (Lab.local() or acquire_ray()) first")
        out["available_remote"] = float(ray.cluster_resources().get("GPU", 0.0))
        if asked_remote > out["available_remote"] + 1e-9:
            raise ValueError(
                f"the policy group asks for {asked_remote:g} GPUs ({detail}) but the Ray cluster has "
                f"{out['available_remote']:g}; lower the GPU counts or add GPU nodes"
            )
    if asked_local > 0:
        import torch

        out["available_local"] = float(torch.cuda.device_count()) if torch.cuda.is_available() else 0.0
        if asked_local > out["available_local"] + 1e-9:
            raise ValueError(
                f"the local policy workers ask for {asked_local:g} GPUs ({detail}) but this process sees "
                f"{out['available_local']:g}; lower the GPU counts or run the workers remotely"
            )
    return out


def _launch(
    cls: type,
    policy_cfg: PolicyConfig,
    role: PolicyRole,
    index: int,
    num_cpus: float,
    num_gpus: float,
    env_vars: Dict[str, str],
    extra: Optional[Dict[str, Any]] = None,
):
    name = f"policy-{role}-{policy_cfg.type}-{str(uuid.uuid4())[:8]}"
    options: Dict[str, Any] = {
        "num_gpus": num_gpus,
        "num_cpus": num_cpus,
        "name": name,
        "namespace": "policy",
        "runtime_env": {"env_vars": dict(env_vars)},
    }
    options.update(extra or {})
    if role is PolicyRole.EVAL and policy_cfg.rollout_mode == "async":
        options["max_concurrency"] = policy_cfg.max_concurrency
    return launch_ray_actor(cls, policy_cfg, role_type=role, worker_index=index, options=options)


UNSTARTED_RETRIES = 3
"""Times a policy actor that Ray lost before it ran is started again (`_restart_unstarted`)."""


def _restart_unstarted(starts: List[Any], workers: Dict[str, List[Any]]) -> None:
    """Wait until every policy actor answers; one that Ray lost before it ran is started again, up to
    `UNSTARTED_RETRIES` times, a second apart.

    Ray can drop an actor before its creation task runs (its owner's reference poll failed, the
    node it was leased on went away; seen on a loaded machine's SSH-launched head, twice in a row):
    the actor then never ran any of our code, so starting it again is safe. An actor whose
    constructor raised is not restarted: that error is raised as is, as is the last loss.
    """
    if not starts:
        return
    import ray
    from ray.exceptions import RayActorError

    pending = [(role, index, start, workers[role][index].get_placement_info.remote()) for role, index, start in starts]
    for role, index, start, ref in pending:
        for attempt in range(UNSTARTED_RETRIES + 1):
            try:
                ray.get(ref)
                break
            except RayActorError as err:
                if err.actor_init_failed or attempt == UNSTARTED_RETRIES:
                    raise
                logger.warning(
                    "%s worker %d was lost before it started (%s); starting it again (%d of %d)",
                    role,
                    index,
                    err,
                    attempt + 1,
                    UNSTARTED_RETRIES,
                )
                ray.kill(workers[role][index], no_restart=True)
                time.sleep(1.0)
                workers[role][index] = start()
                ref = workers[role][index].get_placement_info.remote()


def build_policy_group(
    policy_cls: Union[str, Type[BasePolicy]],
    policy_cfg: PolicyConfig,
    cluster_cfg: ClusterConfig,
    backend: str = "nccl",
    is_colocated: bool = False,
    *,
    placement: Optional[Placement] = None,
) -> PolicyGroup:
    """Build a policy group with train and eval workers.

    Workers are Ray actors when ``placement.remote_train`` / ``remote_eval``
    (no placement: ``InternalFlag.REMOTE_TRAIN`` / ``REMOTE_EVAL`` now) say so
    (``num_gpus`` = ``train_each_gpu_num`` / ``eval_each_gpu_num``; async eval
    workers get ``max_concurrency``), local objects otherwise. The networks are
    built later, by ``PolicyGroup.construct_network(env_meta)``.

    Args:
        policy_cls: Name of the policy class registered in ``POLICIES`` (or the class).
        policy_cfg: Policy configuration object.
        cluster_cfg: Cluster configuration object.
        backend: Communication backend for distributed training (``nccl`` falls back to gloo without GPUs).
        is_colocated: If True, only initialize training policies for comm groups.
        placement: The run's `Placement` (which workers are actors; their ``RLIGHTNING_*`` variables);
            None: as `InternalFlag` says.

    Returns:
        PolicyGroup containing configured train and eval workers.

    Raises:
        KeyError: an unregistered policy type.
        TypeError: a config (or ``placement``) of the wrong type.
        ValueError: an unknown backend, more GPUs asked than available, or several local train workers.
    """
    if not isinstance(policy_cfg, PolicyConfig):
        raise TypeError(f"policy_cfg must be a PolicyConfig, got {type(policy_cfg).__name__}")
    if not isinstance(cluster_cfg, ClusterConfig):
        raise TypeError(f"cluster_cfg must be a ClusterConfig, got {type(cluster_cfg).__name__}")
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not a torch.distributed backend here; use one of {BACKENDS}")
    cls = resolve_policy_class(policy_cls)
    c = cluster_cfg
    p = resolve_placement("train", None, placement)
    env_vars = p.env_vars()
    if c.train_worker_num > 1 and not p.remote_train:
        raise ValueError(
            f"train_worker_num={c.train_worker_num} needs remote train workers (one process each for DDP); "
            "set cluster.remote_train=True or train_worker_num=1"
        )
    check_gpu_request(c, p)
    train_cls = create_distributed_policy_class(cls, role_type=PolicyRole.TRAIN)
    eval_cls = create_distributed_policy_class(cls, role_type=PolicyRole.EVAL)
    train_workers: List[Any] = []
    eval_workers: List[Any] = []
    group = None
    train_pg = None
    relaunch: List[Any] = []  # (role, index, start) for every actor: one more start if it dies before it runs
    try:
        if p.remote_train and c.train_placement is not None:
            from rlightning.utils.ray.placement_groups import TrainPlacement

            train_pg = TrainPlacement(
                c.train_worker_num, c.train_each_cpu_num, c.train_each_gpu_num, c.train_resources, c.train_placement
            )
        for i in range(c.train_worker_num):
            if p.remote_train:
                extra = dict(train_pg.options(i)) if train_pg is not None else {}
                if c.train_resources:
                    extra["resources"] = dict(c.train_resources)
                relaunch.append(
                    (
                        "train",
                        i,
                        functools.partial(
                            _launch,
                            train_cls,
                            policy_cfg,
                            PolicyRole.TRAIN,
                            i,
                            c.train_each_cpu_num,
                            c.train_each_gpu_num,
                            env_vars,
                            extra,
                        ),
                    )
                )
                train_workers.append(relaunch[-1][2]())
            else:
                worker = cls(policy_cfg, role_type=PolicyRole.TRAIN, worker_index=i)
                worker.setup_resources(num_cpus=c.train_each_cpu_num, num_gpus=c.train_each_gpu_num)
                train_workers.append(worker)
        for i in range(c.eval_worker_num):
            if p.remote_eval:
                start = functools.partial(
                    _launch,
                    eval_cls,
                    policy_cfg,
                    PolicyRole.EVAL,
                    i,
                    c.eval_each_cpu_num,
                    c.eval_each_gpu_num,
                    env_vars,
                )
                relaunch.append(("eval", i, start))
                eval_workers.append(start())
            else:
                worker = cls(policy_cfg, role_type=PolicyRole.EVAL, worker_index=i)
                worker.setup_resources(num_cpus=c.eval_each_cpu_num, num_gpus=c.eval_each_gpu_num)
                eval_workers.append(worker)
        _restart_unstarted(relaunch, {"train": train_workers, "eval": eval_workers})
        group = PolicyGroup(train_policy_list=train_workers, eval_policy_list=eval_workers, config=policy_cfg)
        group.train_placement = train_pg
        if p.remote_eval:
            group.set_eval_relauncher(
                lambda i: _launch(
                    eval_cls, policy_cfg, PolicyRole.EVAL, i, c.eval_each_cpu_num, c.eval_each_gpu_num, env_vars
                )
            )
        colocated = bool(is_colocated or c.is_colocated)
        group.init_placement_info(is_colocated=colocated)
        # weight_buffer initialization must be after placement info initialization
        if train_workers:
            group.init_weight_buffer()
        if p.remote_train or p.remote_eval:
            group.init_comm_group(backend=backend, is_colocated=colocated)
    except BaseException:
        if group is not None:
            group.shutdown()
        else:
            from rlightning.utils.ray.handle import WorkerHandle

            for w in train_workers + eval_workers:
                WorkerHandle(w).kill()
            if train_pg is not None:
                train_pg.remove()
        raise
    return group
