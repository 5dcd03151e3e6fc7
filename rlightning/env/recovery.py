"""`WorkerRecovery`: brings back env workers that died or whose env raised, and says what was lost.

The group's calls go through `WorkerRecovery.resolve`: a worker whose actor
died (``RayActorError``) or whose env code raised (a ``RayTaskError`` from an
actor, the exception itself from a local worker) is recreated and reset, and
its reset `EnvRet` stands in for the lost result. The env id is queued for
`pop_restarted` (the engine truncates its episodes in flight, so they are never
stored as complete); restarts and env errors are counted in `GroupStats`.
``EnvConfig.max_restarts`` limits CONSECUTIVE failures: a worker whose next
step (or rollout) after a restart succeeds is forgiven (`forgive`).
``EnvConfig.max_total_restarts`` (None: unlimited) limits restarts over the
worker's life, and ``EnvConfig.failure_rate_limit`` (None: off) the failures
within any ``failure_rate_window_s`` seconds. Past any of them, `EnvWorkerError`
stops the run naming the env id, the limit, the counts and the original exception.
Caller errors (marked with `rlightning.env.errors.caller_error`) and Ray's
own errors are re-raised as they are.

A Ray worker whose step, reset or rollout takes longer than its timeout
(``EnvConfig.step_timeout_s``; None: ``max(60 s, 100 x`` the median of that
call's measured times, none before the first is measured) is killed and
recreated like a dead one, counted as a timeout (``env_timeouts``).
Local workers cannot be interrupted: they have no timeout.

After an env error, a worker whose class has ``recreate_env`` (the gymnasium
backend) rebuilds its env in place: the actor (or object) and its policy copy
stay. Otherwise, and after a death, a new worker is launched and gets its
policy copy and weights back through ``reattach``.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from time import monotonic
from typing import Any, Callable, Deque, Dict, List, Optional, Sequence, Tuple

from rlightning.env.errors import EnvWorkerError, classify_env_failure, original_error
from rlightning.env.utils.stats import GroupStats
from rlightning.env.worker_slot import WorkerSlot
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import resolve, resolve_one, wait_any

logger = get_logger(__name__)

__all__ = ["WorkerRecovery", "forgive", "limit_reached"]

#: The derived timeout: at least this many seconds ...
TIMEOUT_FLOOR_S = 60.0
#: ... and this many times the median measured duration of the call.
TIMEOUT_FACTOR = 100.0
#: Durations kept per call kind for the median.
TIMED_CALLS = 64


class WorkerRecovery:
    """The restart path of a group of env workers.

    Args:
        stats: Where restarts and env errors are counted.
        seed_for: The reset seed of a recreated worker (its slot's restart count is already raised).
        reattach: Gives a newly launched worker its policy copy and weights back (a no-op without one).

    Attributes:
        remote: Whether the workers are Ray actors (set by the group when it builds them).
        gone: True once a worker failed past ``max_restarts``.
    """

    def __init__(
        self,
        stats: GroupStats,
        seed_for: Callable[[WorkerSlot], Optional[int]],
        reattach: Callable[[WorkerSlot], None],
    ) -> None:
        self.remote = False
        self.gone = False
        self._stats = stats
        self._seed_for = seed_for
        self._reattach = reattach
        self._restarted: List[str] = []
        self._durations: Dict[str, Deque[float]] = {}
        #: ``EnvConfig.step_timeout_s`` of the group (set by the group; None: derived from measured times).
        self.step_timeout_s: Optional[float] = None

    def pop_restarted(self) -> List[str]:
        """Env ids recreated since the last call, one entry per recreation."""
        out, self._restarted = self._restarted, []
        return out

    def classify(self, err: BaseException) -> Optional[str]:
        """``"died"``, ``"raised"`` or None (not the worker's failure: re-raise); see `classify_env_failure`."""
        return classify_env_failure(err, self.remote)

    def timeout_for(self, method: str) -> Optional[float]:
        """Seconds a Ray worker's ``method`` call may take (None: no limit; local workers never have one)."""
        if not self.remote:
            return None
        if self.step_timeout_s is not None:
            return float(self.step_timeout_s)
        seen = self._durations.get(method)
        if not seen:
            return None
        return max(TIMEOUT_FLOOR_S, TIMEOUT_FACTOR * statistics.median(seen))

    def record(self, method: str, seconds: float) -> None:
        """Note how long a healthy ``method`` call took (the derived timeout's median)."""
        self._durations.setdefault(method, deque(maxlen=TIMED_CALLS)).append(float(seconds))

    def time_out(self, slot: WorkerSlot, method: str, timeout: float) -> Any:
        """``slot``'s ``method`` call did not return within ``timeout`` s: kill and recreate the worker (its
        episodes in flight dropped, counted in ``env_timeouts``); returns its reset EnvRet.

        Raises:
            EnvWorkerError: past the restart limits, naming the worker and the time.
        """
        self._stats.add_timeout(slot.env_id)
        cause = TimeoutError(f"{method} did not return within {timeout:.1f} s (env.step_timeout_s)")
        return self.restart(slot, cause, kind="timeout", method=method)

    def wait_ready(
        self, futures: List[Any], sent: Dict[Any, float], wanted: int, timeout: Optional[float]
    ) -> Tuple[List[Any], List[Any]]:
        """(ready, late): wait for ``wanted`` step futures (at most ``timeout`` s); ``late`` are those in flight
        (since ``sent[future]``) for longer than the step timeout, returned as soon as there are any."""
        limit = self.timeout_for("step")
        if limit is None:
            return list(wait_any(futures, num_returns=wanted, timeout=timeout)[0]), []
        end = None if timeout is None else time.perf_counter() + timeout
        while True:
            now = time.perf_counter()
            first_due = min(sent.get(f, now) for f in futures) + limit
            wait_s = max(0.0, first_due - now)
            if end is not None:
                wait_s = min(wait_s, max(0.0, end - now))
            ready, pending = wait_any(futures, num_returns=wanted, timeout=wait_s)
            now = time.perf_counter()
            late = [f for f in pending if now - sent.get(f, now) >= limit]
            if ready or late or (end is not None and now >= end):
                return list(ready), late

    def resolve(
        self,
        slots: Sequence[WorkerSlot],
        futures: Sequence[Any],
        replaced: Optional[Dict[int, Any]] = None,
        method: str = "step",
    ) -> List[Any]:
        """`resolve` the futures of ``slots``' ``method`` calls; a failed worker's reset EnvRet stands in.

        Args:
            replaced: Filled with position -> reset EnvRet for every worker that was recreated.

        Raises:
            EnvWorkerError: a worker failed past ``max_restarts``.
            Exception: a caller error or another failure that is not the worker's, as it was raised.
        """
        clean = method != "reset"  # a step that succeeds forgives earlier failures; a reset does not
        timeout = self.timeout_for(method)
        late: set = set()
        start = time.perf_counter()
        # One ``ray.get`` bounded by the timeout; only when it runs out, a ``ray.wait`` that does not wait says
        # which calls are late (a ``ray.wait`` before every ``ray.get`` cost the per-step layout 3-6 %).
        try:
            values = resolve(futures, timeout=timeout)
        except Exception as err:  # noqa: BLE001 - re-raised unless a worker is to be recreated
            if timeout is not None and _is_get_timeout(err):
                late = {id(f) for f in wait_any(futures, num_returns=len(futures), timeout=0)[1]}
            elif self.classify(err) is None:
                raise
        else:
            if self.remote:
                self.record(method, time.perf_counter() - start)
            if clean:
                for slot in slots:
                    forgive(slot)
            return values
        out = []
        for i, (slot, fut) in enumerate(zip(slots, futures)):
            # a call that raised may have ended the ray.get before a hung one ran out: the rest of the timeout
            left = None if timeout is None else max(0.0, timeout - (time.perf_counter() - start))
            if id(fut) in late:
                env_ret = self.time_out(slot, method, timeout)
                if replaced is not None:
                    replaced[i] = env_ret
                out.append(env_ret)
                continue
            try:
                out.append(resolve_one(fut, timeout=left))
            except Exception as err:  # noqa: BLE001 - re-raised unless a worker is to be recreated
                if left is not None and _is_get_timeout(err):
                    env_ret = self.time_out(slot, method, timeout)
                else:
                    env_ret = self.recover(slot, err, method)
                if replaced is not None:
                    replaced[i] = env_ret
                out.append(env_ret)
            else:
                if clean:
                    forgive(slot)
        return out

    def recover(self, slot: WorkerSlot, err: BaseException, method: str) -> Any:
        """Recreate ``slot`` after ``err`` from its ``method`` call and return its reset EnvRet; re-raise
        ``err`` when it is not the worker's failure (a caller error, Ray's own errors)."""
        kind = self.classify(err)
        if kind is None:
            raise err
        return self.restart(slot, err, kind=kind, method=method)

    def restart(self, slot: WorkerSlot, cause: BaseException, kind: str = "died", method: str = "step") -> Any:
        """Recreate a worker whose actor died (``kind="died"``), whose env raised (``"raised"``) or whose call
        timed out (``"timeout"``: the actor is killed).

        Returns:
            The recreated worker's reset EnvRet.

        Raises:
            EnvWorkerError: the worker failed ``max_restarts`` times in a row, or was recreated
                ``max_total_restarts`` times (env id, counts and the original exception named; chained from
                the failure).
        """
        while True:
            if kind == "raised":
                slot.env_errors += 1
                self._stats.add_env_error(slot.env_id)
            slot.failure_times.append(monotonic())
            if limit_reached(slot):
                if kind == "raised":
                    slot.discard()
                else:
                    slot.stop()
                self.gone = True
                raise failed_for_good(slot, cause, kind, method) from cause
            in_place = kind == "raised" and slot.handle is not None and slot.recreates_in_place
            self._log(slot, cause, kind, method, in_place)
            if not in_place:
                if kind == "raised":
                    slot.discard()
                else:
                    slot.stop()
            slot.restarts += 1
            slot.failures += 1
            self._stats.add_restart(slot.env_id)
            self._restarted.append(slot.env_id)
            try:
                if in_place:
                    return slot.handle.call("recreate_env", seed=self._seed_for(slot))
                slot.launch(self.remote)
                self._reattach(slot)
                return slot.handle.call("reset", seed=self._seed_for(slot))
            except Exception as err:  # noqa: BLE001 - failing again counts as another restart
                kind = self.classify(err)
                if kind is None:
                    raise
                cause, method = err, "reset"

    @staticmethod
    def _log(slot: WorkerSlot, cause: BaseException, kind: str, method: str, in_place: bool) -> None:
        if kind == "timeout":
            logger.warning(
                "env worker %s: %s; killing and recreating it (failure %d in a row of at most %d); its episodes in "
                "flight are dropped",
                slot.env_id,
                cause,
                slot.failures + 1,
                slot.config.max_restarts,
            )
            return
        if kind == "died":
            logger.warning("env worker %s died (%s); restarting it", slot.env_id, type(cause).__name__)
            return
        orig = original_error(cause)
        logger.warning(
            "env worker %s raised %s in %s: %s; recreating %s (env error %d, failure %d in a row of at most %d); "
            "its episodes in flight are dropped",
            slot.env_id,
            type(orig).__name__,
            method,
            orig,
            "its env" if in_place else "it",
            slot.env_errors,
            slot.failures + 1,
            slot.config.max_restarts,
        )

    def drain(self, inflight: Dict[Any, WorkerSlot], recover: bool = False) -> None:
        """Wait for the calls in flight (future -> slot), drop their results and clear ``inflight``.

        A worker whose env raised is counted and, with ``recover``, recreated now (the group is about to
        reset it); a dead worker is dealt with on its next call.
        """
        failed: List[Tuple[WorkerSlot, BaseException]] = []
        limit = self.timeout_for("step")
        hung: List[WorkerSlot] = []
        for fut, slot in list(inflight.items()):
            slot.inflight = False
            if limit is not None and wait_any([fut], 1, limit)[1]:
                hung.append(slot)  # never returned: killed and recreated below, not waited for forever
                continue
            try:
                resolve_one(fut)
            except Exception as err:  # noqa: BLE001 - dropped results; a dead worker shows up on its next call
                logger.debug("dropped an in-flight step of %s: %r", slot.env_id, err)
                if recover and self.classify(err) == "raised":
                    failed.append((slot, err))
        inflight.clear()
        for slot in hung:
            self.time_out(slot, "step", limit)
        for slot, err in failed:
            self.restart(slot, err, kind="raised", method="step")


def forgive(slot: WorkerSlot) -> None:
    """A call of ``slot`` succeeded: its earlier failures no longer count towards ``max_restarts``."""
    slot.failures = 0


def limit_reached(slot: WorkerSlot) -> str:
    """Which restart limit ``slot`` has reached, as the error names it ("" when none)."""
    total = slot.config.max_total_restarts
    if total is not None and slot.restarts >= total:
        return (
            f"max_total_restarts={total} reached (restarts over the run; raise env.max_total_restarts "
            "(EnvConfig.max_total_restarts) to allow more)"
        )
    rate = slot.config.failure_rate_limit
    if rate is not None:
        window = slot.config.failure_rate_window_s
        while slot.failure_times and slot.failure_times[0] < monotonic() - window:
            slot.failure_times.popleft()
        if len(slot.failure_times) > rate:
            return (
                f"failure_rate_limit={rate} reached ({len(slot.failure_times)} failures within "
                f"failure_rate_window_s={window:g} s; raise env.failure_rate_limit (EnvConfig.failure_rate_limit) "
                "or shorten env.failure_rate_window_s to allow more)"
            )
    if slot.failures >= slot.config.max_restarts:
        return (
            f"max_restarts={slot.config.max_restarts} reached ({slot.failures} restart(s) in a row without a clean "
            "step between; raise env.max_restarts (EnvConfig.max_restarts) to allow more)"
        )
    return ""


def failed_for_good(slot: WorkerSlot, cause: BaseException, kind: str, method: str) -> EnvWorkerError:
    """The `EnvWorkerError` of a worker that failed past ``max_restarts`` or ``max_total_restarts``."""
    reached = limit_reached(slot)
    if kind == "timeout":
        message = f"env worker {slot.env_id} {cause}; it was already restarted {slot.restarts} time(s): {reached}"
        return EnvWorkerError(message, slot.env_id, slot.restarts, slot.env_errors)
    if kind == "died":
        message = f"env worker {slot.env_id} died and was already restarted {slot.restarts} time(s); {reached}"
        return EnvWorkerError(message, slot.env_id, slot.restarts, slot.env_errors)
    orig = original_error(cause)
    message = (
        f"env worker {slot.env_id} raised {type(orig).__name__} in {method}: {orig}; that is env error "
        f"{slot.env_errors} of this worker, and it was already recreated {slot.restarts} time(s): {reached}"
    )
    return EnvWorkerError(message, slot.env_id, slot.restarts, slot.env_errors, cause=orig)


def _is_get_timeout(err: BaseException) -> bool:
    """True for Ray's ``GetTimeoutError`` (a ``ray.get`` whose timeout ran out), not for a worker's own error."""
    try:
        from ray.exceptions import GetTimeoutError
    except ImportError:  # pragma: no cover - no Ray: no remote call to time out
        return False
    return isinstance(err, GetTimeoutError)
