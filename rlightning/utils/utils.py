"""The seed's view of the process's switches (`InternalFlag`, read from the environment) and small helpers."""

from __future__ import annotations

import os
from typing import Any, Dict, List

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def _read_bool(var: str, default: bool) -> bool:
    raw = os.environ.get(var)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"environment variable {var}={raw!r} is not a boolean; use one of 1/0, true/false, yes/no, on/off")


class _FlagMeta(type):
    """Makes each flag a read of ``RLIGHTNING_<NAME>`` at access, and an assignment an export."""

    def __getattr__(cls, name: str) -> bool:
        # only reached for names the class itself does not define: the flags
        if name in type.__getattribute__(cls, "NAMES"):
            return _read_bool(f"RLIGHTNING_{name}", False)
        raise AttributeError(f"InternalFlag has no attribute {name!r}; flags: {', '.join(cls.NAMES)}")

    def __setattr__(cls, name: str, value: Any) -> None:
        if name in type.__getattribute__(cls, "NAMES"):
            cls.set(**{name: value})
            return
        super().__setattr__(name, value)

    def __dir__(cls) -> List[str]:
        return sorted(set(super().__dir__()) | set(cls.NAMES))

    def __repr__(cls) -> str:
        return "InternalFlag(" + ", ".join(f"{k}={getattr(cls, k)}" for k in cls.NAMES) + ")"


class InternalFlag(metaclass=_FlagMeta):
    """The seed's view of the process's switches: each flag is read from ``RLIGHTNING_<NAME>`` when accessed.

    ``REMOTE_*`` say, for seed code that builds components without an explicit
    placement, whether workers are Ray actors (True) or built in the calling
    process (False); an unset variable reads False, so a variable set after
    import takes effect at the next read. The library builds a run from an
    explicit `rlightning.utils.placement.Placement` (the config's, or a ``Lab``
    argument) and never flips these; its actors receive the run's placement
    through ``Placement.env_vars()``. ``InternalFlag.set(...)`` (or assigning an
    attribute) exports the variable.

    Raises:
        ValueError: on reading a flag whose variable is not a boolean word.
    """

    NAMES = ("DEBUG", "VERBOSE", "REMOTE_TRAIN", "REMOTE_EVAL", "REMOTE_ENV", "REMOTE_STORAGE")

    DEBUG: bool
    VERBOSE: bool
    REMOTE_TRAIN: bool
    REMOTE_EVAL: bool
    REMOTE_ENV: bool
    REMOTE_STORAGE: bool

    @classmethod
    def reload(cls) -> None:
        """Check every ``RLIGHTNING_*`` variable now (flags are read on access; this only validates them).

        Raises:
            ValueError: a variable that is not a boolean word.
        """
        cls.snapshot()

    @classmethod
    def set(cls, **flags: bool) -> None:
        """Set flags by name, e.g. ``InternalFlag.set(REMOTE_ENV=True)``: exports ``RLIGHTNING_<NAME>``.

        Raises:
            KeyError: an unknown flag name (the valid ones are listed).
            TypeError: a value that is not a bool.
        """
        checked = {}
        for name, value in flags.items():
            key = name.upper()
            if key not in cls.NAMES:
                raise KeyError(f"unknown InternalFlag {name!r}; valid flags: {', '.join(cls.NAMES)}")
            if not isinstance(value, bool):
                raise TypeError(f"InternalFlag {key} must be a bool, got {value!r}")
            checked[key] = value
        for key, value in checked.items():
            os.environ[f"RLIGHTNING_{key}"] = "1" if value else "0"

    @classmethod
    def from_cluster_config(cls, cluster_cfg: Any) -> None:
        """Export the ``REMOTE_*`` flags of a `ClusterConfig` (for seed code; the library passes a `Placement`)."""
        cls.set(
            REMOTE_ENV=bool(cluster_cfg.remote_env),
            REMOTE_EVAL=bool(cluster_cfg.remote_eval),
            REMOTE_TRAIN=bool(cluster_cfg.remote_train),
            REMOTE_STORAGE=bool(cluster_cfg.remote_storage),
        )

    @classmethod
    def snapshot(cls) -> Dict[str, bool]:
        """The current flags as a dict."""
        return {name: _read_bool(f"RLIGHTNING_{name}", False) for name in cls.NAMES}

    @classmethod
    def get_env_vars(cls) -> Dict[str, str]:
        """The flags as ``RLIGHTNING_*`` environment variables for an actor's ``runtime_env``."""
        return {f"RLIGHTNING_{name}": "1" if value else "0" for name, value in cls.snapshot().items()}


def set_worker_threads(num_threads: int = 1) -> None:
    """Limit torch and OpenMP threads in this process to the CPUs the worker was given."""
    n = max(1, int(num_threads))
    os.environ["OMP_NUM_THREADS"] = str(n)
    os.environ["MKL_NUM_THREADS"] = str(n)
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
