"""Turn a plain worker class into a Ray actor, only at launch time."""

from __future__ import annotations

import functools
import math
import os
import sys
from typing import Any, Dict, Optional, Tuple

from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

_INSTALL_HINT = "Ray is needed for remote workers: pip install ray"


def import_ray():
    """Import and return the ``ray`` module, with an install hint if it is missing."""
    try:
        import ray
    except ImportError as err:  # pragma: no cover - ray is a dependency
        raise ImportError(_INSTALL_HINT) from err
    return ray


def _ship_by_value(cls: type) -> None:
    """Let workers unpickle classes defined in a notebook or a non-importable module."""
    module = sys.modules.get(cls.__module__)
    if module is None or cls.__module__ == "__main__":
        return  # cloudpickle already ships __main__ by value
    spec = getattr(module, "__spec__", None)
    if spec is None or getattr(spec, "origin", None) in (None, "<stdin>"):
        from ray import cloudpickle

        cloudpickle.register_pickle_by_value(module)


#: Constructor keyword that carries `process_env` variables into a launched actor (see `_setting_process_env`).
PROCESS_ENV_KW = "_rlightning_process_env"


def _split_env_vars(env_vars: Dict[str, str]) -> Tuple[Dict[str, str], Dict[str, str]]:
    """(read on access, the rest): the ``InternalFlag`` variables, which code reads when it asks (not at
    import), can be set in the actor's process by its constructor; any other variable (threads, the log
    level, a user's) must be in the process's environment from the start, so it stays in ``runtime_env``."""
    from rlightning.utils.utils import InternalFlag

    on_access = {f"RLIGHTNING_{name}" for name in InternalFlag.NAMES}
    late = {k: v for k, v in env_vars.items() if k in on_access}
    early = {k: v for k, v in env_vars.items() if k not in on_access}
    return late, early


@functools.cache
def _setting_process_env(cls: type) -> type:
    """A subclass of ``cls`` whose constructor first sets the variables passed as ``PROCESS_ENV_KW``.

    Ray starts a fresh worker process for an actor whose ``runtime_env`` differs from the job's,
    instead of taking one of the workers it prestarts: on a small machine that is a process start and
    Ray's import (0.7 s here) on the first build's path. Variables read on access reach the actor this
    way instead, so the placement flags need no ``runtime_env``. One subclass per class (cached), with
    the class's own name, module and docstring, so Ray names the actor as before.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        os.environ.update(kwargs.pop(PROCESS_ENV_KW, None) or {})
        cls.__init__(self, *args, **kwargs)

    attrs = {"__init__": __init__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}
    attrs["__doc__"] = cls.__doc__
    return type(cls.__name__, (cls,), attrs)


def launch_ray_actor(cls: type, *args: Any, options: Optional[Dict[str, Any]] = None, **kwargs: Any):
    """Launch ``cls(*args, **kwargs)`` as a Ray actor and return its handle.

    Args:
        cls: A plain Python class (the same class works in-process).
        *args: Constructor positional arguments.
        options: Ray actor options (``num_cpus``, ``num_gpus``, ``name``, ``namespace``,
            ``runtime_env``, ``max_concurrency``, ...). Each actor gets
            ``OMP_NUM_THREADS`` set to its CPUs (at least 1) unless given.
        **kwargs: Constructor keyword arguments.

    Raises:
        RuntimeError: Ray is not initialised (use a Lab or ``acquire_ray`` first).
    """
    ray = import_ray()
    if not ray.is_initialized():
        raise RuntimeError(
            f"cannot launch {cls.__name__} as a Ray actor: Ray is not initialised; "
            "start it with rlightning.notebook.Lab.local() or rlightning.utils.ray.runtime.acquire_ray()"
        )
    opts = dict(options or {})
    threads = str(max(1, math.floor(float(opts.get("num_cpus", 1) or 1))))
    runtime_env = dict(opts.get("runtime_env") or {})
    env_vars = {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    env_vars.update(runtime_env.get("env_vars") or {})
    process_env, env_vars = _split_env_vars(env_vars)
    if process_env and not (hasattr(cls, "remote") and hasattr(cls, "options")):
        cls = _setting_process_env(cls)
        kwargs[PROCESS_ENV_KW] = process_env
    else:
        env_vars.update(process_env)  # an already-decorated actor class: through runtime_env as before
    # Values the workers of a runtime started here already inherit need no runtime_env: an actor
    # without one can take a worker Ray prestarted instead of waiting for a new process.
    from rlightning.utils.ray.runtime import worker_env

    inherited = worker_env()
    env_vars = {k: v for k, v in env_vars.items() if inherited.get(k) != v}
    if env_vars:
        runtime_env["env_vars"] = env_vars
    else:
        runtime_env.pop("env_vars", None)
    if runtime_env:
        opts["runtime_env"] = runtime_env
    else:
        opts.pop("runtime_env", None)
    _ship_by_value(cls)
    for arg in args:  # a class handed to the constructor (an env class for a RolloutWorker) travels too
        if isinstance(arg, type):
            _ship_by_value(arg)
    actor_cls = cls if hasattr(cls, "remote") and hasattr(cls, "options") else ray.remote(cls)
    logger.debug("launching %s with options %s", cls.__name__, opts)
    return actor_cls.options(**opts).remote(*args, **kwargs)
