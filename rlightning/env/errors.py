"""Env errors: which exceptions of an env worker are the env's (recreate it) and which are the caller's (raise).

An exception raised by an env's own code (a simulator that crashes in ``step``
or ``reset``) does not end a run: the group recreates the worker, drops its
episodes in flight and counts an env error; past ``EnvConfig.max_restarts``
it raises `EnvWorkerError`. An exception that is the caller's bug (a
`PolicyResponse` of the wrong kind or env, an action outside the space, a
``preprocess_fn`` that fails, a policy copy that fails) is raised at once,
never retried. The checks that find such bugs mark their exception with
`caller_error`; the group reads the mark with `is_caller_error`, also through
a ``RayTaskError`` (the mark travels with the pickled exception).

The module imports no Ray (it is read from ``sys.modules`` when present).
"""

from __future__ import annotations

import sys
from typing import Optional, TypeVar

E = TypeVar("E", bound=BaseException)

_MARK = "_rlightning_caller_error"

__all__ = ["EnvWorkerError", "caller_error", "is_caller_error", "original_error", "classify_env_failure"]


class EnvWorkerError(RuntimeError):
    """An env worker failed more often than ``EnvConfig.max_restarts`` allows; the run stops.

    Attributes:
        env_id: The env worker's id.
        restarts: How many times it was recreated before this failure.
        env_errors: How many of its failures were exceptions of the env's own code.
        cause: The original exception (the user's, not Ray's wrapper), or None for an actor death.
    """

    def __init__(
        self, message: str, env_id: str, restarts: int, env_errors: int, cause: Optional[BaseException] = None
    ) -> None:
        super().__init__(message)
        self.env_id = env_id
        self.restarts = restarts
        self.env_errors = env_errors
        self.cause = cause

    def __reduce__(self):  # keep the attributes through pickling (Ray, multiprocessing)
        return (type(self), (str(self), self.env_id, self.restarts, self.env_errors, self.cause))


def caller_error(err: E) -> E:
    """Mark ``err`` as the caller's bug (raised at once, never a restart) and return it: ``raise caller_error(e)``."""
    setattr(err, _MARK, True)
    return err


def original_error(err: BaseException) -> BaseException:
    """The exception the env raised: the ``cause`` of a Ray ``RayTaskError``, else ``err`` itself."""
    ray = sys.modules.get("ray")
    if ray is not None:
        from ray.exceptions import RayTaskError

        if isinstance(err, RayTaskError) and isinstance(getattr(err, "cause", None), BaseException):
            return err.cause
    return err


def is_caller_error(err: BaseException) -> bool:
    """True when ``err`` (or the exception a ``RayTaskError`` wraps) was marked with `caller_error`."""
    return bool(getattr(err, _MARK, False) or getattr(original_error(err), _MARK, False))


def classify_env_failure(err: BaseException, remote: bool) -> Optional[str]:
    """How the group answers an exception from an env worker call.

    Returns:
        ``"died"`` for a dead Ray actor, ``"raised"`` for an exception of the env's own code (a
        ``RayTaskError`` from an actor, any ``Exception`` from a local worker), None for anything else
        (a caller error, Ray's own errors, ``KeyboardInterrupt``): re-raise it.
    """
    if not isinstance(err, Exception) or is_caller_error(err):
        return None
    ray = sys.modules.get("ray")
    if ray is not None:
        from ray.exceptions import RayActorError, RayError, RayTaskError

        if isinstance(err, RayActorError):
            return "died" if remote else None
        if isinstance(err, RayTaskError):
            return "raised"
        if isinstance(err, RayError):  # object lost, timeouts, ...: not the env's code
            return None
    return None if remote else "raised"
