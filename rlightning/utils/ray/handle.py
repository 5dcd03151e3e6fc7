"""The call layer: one interface over a local worker object or a Ray actor handle.

h = WorkerHandle(worker)            # a plain object or an ActorHandle
h.call("step", resp)                # a value, either way
fut = h.submit("step", resp)        # an ObjectRef, or a completed LocalFuture
values = resolve([fut1, fut2])      # one ray.get for all the refs
"""

from __future__ import annotations

import sys
import threading
import weakref
from typing import Any, Iterable, List, Sequence, Tuple

from rlightning.types.batched import is_object_ref


def is_actor_handle(obj: Any) -> bool:
    """True when ``obj`` is a Ray ActorHandle (without importing Ray if it is absent)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    actor_handle = getattr(getattr(ray, "actor", None), "ActorHandle", None)
    return actor_handle is not None and isinstance(obj, actor_handle)


def is_actor_death(err: BaseException) -> bool:
    """True when ``err`` says a Ray actor died or is unreachable (``RayActorError`` and its subclasses)."""
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    from ray.exceptions import RayActorError

    return isinstance(err, RayActorError)


class LocalFuture:
    """A completed call in this process: holds its value or its exception."""

    __slots__ = ("_value", "_error")

    def __init__(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value = value
        self._error = error

    def result(self) -> Any:
        """The call's value; re-raises the call's exception."""
        if self._error is not None:
            raise self._error
        return self._value


_LOCKS_GUARD = threading.Lock()
_LOCKS: weakref.WeakKeyDictionary[Any, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_BY_ID: dict = {}  # workers that cannot be weakly referenced (kept for the process's life)


def worker_lock(worker: Any) -> threading.RLock:
    """The lock every handle on the local ``worker`` takes around a call (one per worker object).

    A Ray actor runs one call at a time; a local worker gets the same guarantee this way,
    so a view refreshing in a notebook thread never reads a storage that the engine's
    thread is writing.
    """
    with _LOCKS_GUARD:
        try:
            lock = _LOCKS.get(worker)
            if lock is None:
                lock = _LOCKS[worker] = threading.RLock()
        except TypeError:  # not weakly referenceable or not hashable
            lock = _LOCKS_BY_ID.setdefault(id(worker), threading.RLock())
        return lock


class WorkerHandle:
    """Calls methods on a worker that is either a local object or a Ray actor.

    Calls on a local worker are serialised per worker (`worker_lock`), as an actor's are.

    Args:
        worker: The object or ActorHandle.
    """

    __slots__ = ("worker", "is_remote", "lock")

    def __init__(self, worker: Any) -> None:
        self.worker = worker.worker if isinstance(worker, WorkerHandle) else worker
        self.is_remote = is_actor_handle(self.worker)
        self.lock = None if self.is_remote else worker_lock(self.worker)

    def submit(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Start a call; returns an ObjectRef (remote) or a completed `LocalFuture` (local)."""
        if self.is_remote:
            return getattr(self.worker, method).remote(*args, **kwargs)
        try:
            with self.lock:
                return LocalFuture(getattr(self.worker, method)(*args, **kwargs))
        except Exception as err:  # noqa: BLE001 - delivered on result()
            return LocalFuture(error=err)

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call a method and return its value."""
        if self.is_remote:
            import ray

            return ray.get(getattr(self.worker, method).remote(*args, **kwargs))
        with self.lock:
            return getattr(self.worker, method)(*args, **kwargs)

    def kill(self) -> None:
        """Stop the actor (no-op for a local worker)."""
        if self.is_remote:
            import ray

            try:
                ray.kill(self.worker, no_restart=True)
            except Exception:  # noqa: BLE001 - already dead
                pass

    def __repr__(self) -> str:
        return f"WorkerHandle({'remote' if self.is_remote else 'local'} {self.worker!r})"


def resolve(futures: Sequence[Any], timeout: float | None = None) -> List[Any]:
    """Turn a list of ObjectRefs, LocalFutures and plain values into values, with one ``ray.get``."""
    futures = list(futures)
    out: List[Any] = [None] * len(futures)
    ref_pos = []
    refs = []
    for i, f in enumerate(futures):
        if is_object_ref(f):
            ref_pos.append(i)
            refs.append(f)
        elif isinstance(f, LocalFuture):
            out[i] = f.result()
        else:
            out[i] = f
    if refs:
        import ray

        for i, v in zip(ref_pos, ray.get(refs, timeout=timeout)):
            out[i] = v
    return out


def resolve_one(future: Any, timeout: float | None = None) -> Any:
    """`resolve` for a single future or value."""
    return resolve([future], timeout=timeout)[0]


def wait_any(futures: Iterable[Any], num_returns: int = 1, timeout: float | None = None) -> Tuple[list, list]:
    """Split futures into (ready, pending); local futures and plain values are always ready."""
    futures = list(futures)
    local = [f for f in futures if not is_object_ref(f)]
    refs = [f for f in futures if is_object_ref(f)]
    if not refs or len(local) >= num_returns:
        return local + [], refs
    import ray

    ready, pending = ray.wait(refs, num_returns=min(len(refs), num_returns - len(local)), timeout=timeout)
    return local + ready, pending
