"""`WorkerSlot`: one env worker of an `EnvGroup` (its config, class, handle, restart and env-error counts).

A slot knows how to build its worker (a `RolloutWorker` around the env class),
in this process or as a Ray actor, and how to stop it (`discard` also closes a
worker that is still alive, as one whose env raised is); the group decides
when. The env class is chosen from the
config: ``ENVS[config.backend]`` when the backend is not ``gymnasium``; else
``ENVS[config.name]`` when the name is a registered `BaseEnv`; else the
gymnasium backend.
"""

from __future__ import annotations

import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, List, Optional, Union

from rlightning.env.base_env import BaseEnv
from rlightning.env.gym_env import GymnasiumEnv
from rlightning.env.multi_agent_env import RendezvousEnv  # noqa: F401 - registers "rendezvous" in ENVS
from rlightning.env.pettingzoo_env import PettingZooEnv  # noqa: F401 - registers "pettingzoo" in ENVS
from rlightning.env.rollout_worker import RolloutWorker
from rlightning.env.utils.utils import default_env_preprocess_fn, make_env_id
from rlightning.types import EnvMeta
from rlightning.utils.config import EnvConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, is_actor_death, resolve_one  # noqa: F401 - re-exported
from rlightning.utils.ray.launcher import launch_ray_actor
from rlightning.utils.registry import ENVS
from rlightning.utils.utils import InternalFlag

logger = get_logger(__name__)


def resolve_env_class(config: EnvConfig) -> type:
    """The `BaseEnv` subclass that runs ``config`` (see the module docstring).

    Raises:
        KeyError: ``config.backend`` is not registered in ``ENVS`` (closest names listed).
        TypeError: what is registered is not a `BaseEnv` subclass.
    """
    if config.backend != "gymnasium":
        cls = ENVS.get(config.backend)
        source = f"backend {config.backend!r}"
    elif config.name in ENVS and config.name != "gymnasium":
        cls = ENVS.get(config.name)
        source = f"name {config.name!r}"
    else:
        return GymnasiumEnv
    if not (isinstance(cls, type) and issubclass(cls, BaseEnv)):
        raise TypeError(f"env {source} is registered in ENVS as {cls!r}, which is not a BaseEnv subclass")
    return cls


@dataclass
class WorkerSlot:
    """One env worker: what builds it, and the handle once it is built."""

    index: int
    config: EnvConfig
    preprocess_fn: Callable
    env_cls: type
    seed_offset: int
    env_id: str = ""
    num_envs: int = 1
    handle: Optional[WorkerHandle] = None
    meta: Optional[EnvMeta] = None
    restarts: int = 0
    env_errors: int = 0
    failures: int = 0  # restarts since the worker last stepped cleanly (limited by config.max_restarts)
    failure_times: Deque[float] = field(default_factory=deque)  # monotonic times (config.failure_rate_limit)
    inflight: bool = False
    extra_kwargs: Dict[str, Any] = field(default_factory=dict)
    env_vars: Optional[Dict[str, str]] = None

    def __post_init__(self) -> None:
        self.env_id = make_env_id(self.config.name, self.index)
        self.num_envs = int(self.config.num_envs)

    def prepare(self) -> None:
        """Driver-side checks and extra constructor arguments (``env_cls.prepare``)."""
        self.extra_kwargs = dict(self.env_cls.prepare(self.config) or {})

    def launch(self, remote: bool, env_vars: Optional[Dict[str, str]] = None) -> WorkerHandle:
        """Build the worker (a `RolloutWorker` of ``env_cls``), as a Ray actor when ``remote``.

        ``env_vars`` (the run's placement, `Placement.env_vars`) go to the actor and are kept for relaunches;
        none ever given: the process's `InternalFlag` variables.
        """
        if env_vars is not None:
            self.env_vars = dict(env_vars)
        # A relaunched worker's episode ids start past every id its predecessors could have used.
        base = self.restarts << 40
        kwargs = dict(
            worker_index=self.index, preprocess_fn=self.preprocess_fn, episode_id_base=base, **self.extra_kwargs
        )
        if remote:
            options = {
                "num_cpus": self.config.num_cpus,
                "num_gpus": self.config.num_gpus,
                "name": f"env-{self.env_id}-{uuid.uuid4().hex[:8]}",
                "runtime_env": {"env_vars": self.env_vars or InternalFlag.get_env_vars()},
            }
            if self.config.resources:
                options["resources"] = dict(self.config.resources)
            worker = launch_ray_actor(RolloutWorker, self.env_cls, self.config, options=options, **kwargs)
        else:
            worker = RolloutWorker(self.env_cls, self.config, **kwargs)
        self.handle = WorkerHandle(worker)
        return self.handle

    def stop(self) -> None:
        """Kill the actor (a local worker is just dropped); the slot can be launched again."""
        if self.handle is not None:
            self.handle.kill()
        self.handle = None
        self.inflight = False

    @property
    def recreates_in_place(self) -> bool:
        """True when the worker can rebuild its env itself after an env error (``recreate_env``)."""
        return callable(getattr(self.env_cls, "recreate_env", None))

    def discard(self, close_timeout: float = 10.0) -> None:
        """Close the worker if it still answers (its env may hold subprocesses or a simulator), then `stop`.

        Used before recreating a worker whose env raised: the actor (or object) is alive but its env
        is in an unknown state. Nothing it raises while closing stops the recreation.
        """
        if self.handle is not None:
            try:
                resolve_one(self.handle.submit("close"), timeout=close_timeout)
            except Exception as err:  # noqa: BLE001 - a broken or dead env need not close cleanly
                logger.debug("closing env worker %s before recreating it failed: %r", self.env_id, err)
        self.stop()


def build_slots(
    env_cfg_list: Union[List[EnvConfig], EnvConfig],
    preprocess_fn: Optional[Union[Callable, List[Callable]]] = default_env_preprocess_fn,
) -> List[WorkerSlot]:
    """Check the group's arguments and make one slot per config (global indices ``0..N-1``).

    Raises:
        ValueError: an empty list, ``num_envs < 1``, or a preprocess list of the wrong length.
        TypeError: a non-`EnvConfig` entry or a non-callable preprocess function.
        KeyError: an unregistered env backend.
    """
    if isinstance(env_cfg_list, EnvConfig):
        env_cfg_list = [env_cfg_list]
    if not isinstance(env_cfg_list, (list, tuple)):
        raise TypeError(f"env_cfg_list must be a list of EnvConfig, got {type(env_cfg_list).__name__}")
    if len(env_cfg_list) == 0:
        raise ValueError("env_cfg_list is empty: an EnvGroup needs at least one EnvConfig (num_workers >= 1)")
    for i, cfg in enumerate(env_cfg_list):
        if not isinstance(cfg, EnvConfig):
            raise TypeError(f"env_cfg_list[{i}] must be an EnvConfig, got {type(cfg).__name__}")
        if not isinstance(cfg.num_envs, int) or cfg.num_envs < 1:
            raise ValueError(f"env_cfg_list[{i}].num_envs must be an int >= 1, got {cfg.num_envs!r}")
    if preprocess_fn is None:
        preprocess_fn = default_env_preprocess_fn
    if isinstance(preprocess_fn, (list, tuple)):
        fns = [default_env_preprocess_fn if fn is None else fn for fn in preprocess_fn]
        if len(fns) != len(env_cfg_list):
            raise ValueError(
                f"preprocess_fn has {len(fns)} functions for {len(env_cfg_list)} env workers; give one function, "
                "or one per worker"
            )
    else:
        fns = [preprocess_fn] * len(env_cfg_list)
    for i, fn in enumerate(fns):
        if not callable(fn):
            raise TypeError(f"preprocess_fn[{i}] must be callable (PolicyResponse -> action), got {fn!r}")
    slots = []
    offset = 0
    for i, (cfg, fn) in enumerate(zip(env_cfg_list, fns)):
        env_cls = resolve_env_class(cfg)
        slots.append(WorkerSlot(index=i, config=cfg, preprocess_fn=fn, env_cls=env_cls, seed_offset=offset))
        offset += cfg.num_envs
    return slots
