"""Process-wide switches (`InternalFlag`) and small helpers."""

from __future__ import annotations

import os
from typing import Any, Dict

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
    def __repr__(cls) -> str:
        return "InternalFlag(" + ", ".join(f"{k}={getattr(cls, k)}" for k in cls.NAMES) + ")"


class InternalFlag(metaclass=_FlagMeta):
    """Process-wide switches, read from ``RLIGHTNING_<NAME>`` environment variables.

    ``REMOTE_*`` choose, per component, whether workers are launched as Ray actors
    (True) or built in the calling process (False). A config sets them with
    ``InternalFlag.from_cluster_config``; actors inherit them through
    ``get_env_vars()`` in their ``runtime_env``.
    """

    NAMES = ("DEBUG", "VERBOSE", "REMOTE_TRAIN", "REMOTE_EVAL", "REMOTE_ENV", "REMOTE_STORAGE")

    DEBUG: bool = False
    VERBOSE: bool = False
    REMOTE_TRAIN: bool = False
    REMOTE_EVAL: bool = False
    REMOTE_ENV: bool = False
    REMOTE_STORAGE: bool = False

    @classmethod
    def reload(cls) -> None:
        """Re-read every flag from the environment (unset variables give False)."""
        for name in cls.NAMES:
            setattr(cls, name, _read_bool(f"RLIGHTNING_{name}", False))

    @classmethod
    def set(cls, **flags: bool) -> None:
        """Set flags by name, e.g. ``InternalFlag.set(REMOTE_ENV=True)``; also exported to the environment.

        Raises:
            KeyError: an unknown flag name (the valid ones are listed).
        """
        for name, value in flags.items():
            key = name.upper()
            if key not in cls.NAMES:
                raise KeyError(f"unknown InternalFlag {name!r}; valid flags: {', '.join(cls.NAMES)}")
            if not isinstance(value, bool):
                raise TypeError(f"InternalFlag {key} must be a bool, got {value!r}")
            setattr(cls, key, value)
            os.environ[f"RLIGHTNING_{key}"] = "1" if value else "0"

    @classmethod
    def from_cluster_config(cls, cluster_cfg: Any) -> None:
        """Set the ``REMOTE_*`` flags from a `ClusterConfig`."""
        cls.set(
            REMOTE_ENV=bool(cluster_cfg.remote_env),
            REMOTE_EVAL=bool(cluster_cfg.remote_eval),
            REMOTE_TRAIN=bool(cluster_cfg.remote_train),
            REMOTE_STORAGE=bool(cluster_cfg.remote_storage),
        )

    @classmethod
    def snapshot(cls) -> Dict[str, bool]:
        """The current flags as a dict."""
        return {name: bool(getattr(cls, name)) for name in cls.NAMES}

    @classmethod
    def get_env_vars(cls) -> Dict[str, str]:
        """The flags as ``RLIGHTNING_*`` environment variables for an actor's ``runtime_env``."""
        return {f"RLIGHTNING_{name}": "1" if getattr(cls, name) else "0" for name in cls.NAMES}


InternalFlag.reload()


def set_worker_threads(num_threads: int = 1) -> None:
    """Limit torch and OpenMP threads in this process to the CPUs the worker was given."""
    n = max(1, int(num_threads))
    os.environ["OMP_NUM_THREADS"] = str(n)
    os.environ["MKL_NUM_THREADS"] = str(n)
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
