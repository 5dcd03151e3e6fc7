"""`Placement`: which components of a run are Ray actors, as a value passed down to the builders.

    placement = Placement.from_cluster_config(cfg.cluster)     # what build_run uses
    env_group = build_env_group(cfg.env, placement=placement)  # or remote=True / False for one group
    buffer = build_data_buffer("replay", cfg.buffer, remote=False)

A component built with neither ``placement`` nor ``remote`` follows
`InternalFlag` (the seed's view, read from ``RLIGHTNING_*`` when the component
is built). How many CPUs and GPUs each actor gets stays where the config says
it (``ClusterConfig.*_each_*_num``, ``EnvConfig.num_cpus``, the buffer's
``storage_options``). Ray actors launched under a placement receive it as
their ``RLIGHTNING_REMOTE_*`` variables (`Placement.env_vars`), so code that
reads `InternalFlag` inside an actor sees the run's choice, not the driver's.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Dict, Optional

from rlightning.utils.utils import InternalFlag

__all__ = ["COMPONENTS", "Placement", "check_placement_args", "resolve_placement", "with_env_vars"]

#: The components a placement places, in the order of its fields.
COMPONENTS = ("env", "eval", "train", "storage")


@dataclass(frozen=True)
class Placement:
    """Which components of one run are Ray actors (True) or objects in the calling process (False).

    Attributes:
        remote_env: Env workers.
        remote_eval: Eval (acting) policy workers.
        remote_train: Train policy workers.
        remote_storage: Storage shards of the data buffer.

    Raises:
        TypeError: a field that is not a bool.
    """

    remote_env: bool = False
    remote_eval: bool = False
    remote_train: bool = False
    remote_storage: bool = False

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, bool):
                raise TypeError(
                    f"Placement.{f.name} must be a bool (True: Ray actors, False: in this process), got {value!r}"
                )

    @classmethod
    def from_cluster_config(cls, cluster_cfg: Any) -> Placement:
        """The placement a `ClusterConfig` asks for (its ``remote_*`` fields).

        Raises:
            TypeError: ``cluster_cfg`` is not a `ClusterConfig`.
        """
        from rlightning.utils.config import ClusterConfig

        if not isinstance(cluster_cfg, ClusterConfig):
            raise TypeError(f"cluster_cfg must be a ClusterConfig, got {type(cluster_cfg).__name__}")
        return cls(
            remote_env=cluster_cfg.remote_env,
            remote_eval=cluster_cfg.remote_eval,
            remote_train=cluster_cfg.remote_train,
            remote_storage=cluster_cfg.remote_storage,
        )

    @classmethod
    def from_flags(cls) -> Placement:
        """What `InternalFlag` says now (``RLIGHTNING_REMOTE_*``): the placement of seed code that passes none.

        Raises:
            ValueError: a ``RLIGHTNING_REMOTE_*`` variable that is not a boolean word.
        """
        return cls(
            remote_env=InternalFlag.REMOTE_ENV,
            remote_eval=InternalFlag.REMOTE_EVAL,
            remote_train=InternalFlag.REMOTE_TRAIN,
            remote_storage=InternalFlag.REMOTE_STORAGE,
        )

    def replace(self, **changes: bool) -> Placement:
        """A copy with some fields changed, e.g. ``placement.replace(remote_env=False)``.

        Raises:
            KeyError: an unknown field (the valid ones are listed).
            TypeError: a value that is not a bool.
        """
        names = [f.name for f in dataclasses.fields(self)]
        for key in changes:
            if key not in names:
                raise KeyError(f"Placement has no field {key!r}; fields: {', '.join(names)}")
        return dataclasses.replace(self, **changes)

    def is_remote(self, component: str) -> bool:
        """Whether ``component`` (``env``, ``eval``, ``train`` or ``storage``) runs as Ray actors.

        Raises:
            KeyError: an unknown component (the valid ones are listed).
        """
        if component not in COMPONENTS:
            raise KeyError(f"unknown component {component!r}; components: {', '.join(COMPONENTS)}")
        return getattr(self, f"remote_{component}")

    def env_vars(self) -> Dict[str, str]:
        """``RLIGHTNING_*`` variables for an actor of this run: this placement, and the process's other flags."""
        env = InternalFlag.get_env_vars()
        for component in COMPONENTS:
            env[f"RLIGHTNING_REMOTE_{component.upper()}"] = "1" if self.is_remote(component) else "0"
        return env


def check_placement_args(remote: Optional[bool] = None, placement: Optional[Placement] = None) -> None:
    """Check a component's ``remote`` / ``placement`` arguments without reading any flag.

    Raises:
        TypeError: ``remote`` that is not True/False/None, or ``placement`` that is not a `Placement`.
    """
    if remote is not None and not isinstance(remote, bool):
        raise TypeError(
            f"remote must be True (Ray actors), False (in this process) or None (as InternalFlag says), got {remote!r}"
        )
    if placement is not None and not isinstance(placement, Placement):
        raise TypeError(f"placement must be a Placement (or None: as InternalFlag says), got {placement!r}")


def resolve_placement(
    component: str, remote: Optional[bool] = None, placement: Optional[Placement] = None
) -> Placement:
    """The placement a component is built under: ``placement`` (default: `Placement.from_flags`), with
    ``remote_<component>`` set to ``remote`` when that is given (the more specific argument wins).

    Raises:
        TypeError: ``remote`` that is not True/False/None, or ``placement`` that is not a `Placement`.
        KeyError: an unknown component.
    """
    check_placement_args(remote, placement)
    if component not in COMPONENTS:
        raise KeyError(f"unknown component {component!r}; components: {', '.join(COMPONENTS)}")
    chosen = placement if placement is not None else Placement.from_flags()
    if remote is not None:
        chosen = chosen.replace(**{f"remote_{component}": remote})
    return chosen


def with_env_vars(options: Optional[Dict[str, Any]], env_vars: Dict[str, str]) -> Dict[str, Any]:
    """A copy of Ray actor ``options`` whose ``runtime_env.env_vars`` start from ``env_vars``.

    Variables already in ``options`` win (a caller's explicit choice).
    """
    opts = dict(options or {})
    runtime_env = dict(opts.get("runtime_env") or {})
    merged = dict(env_vars)
    merged.update(runtime_env.get("env_vars") or {})
    runtime_env["env_vars"] = merged
    opts["runtime_env"] = runtime_env
    return opts
