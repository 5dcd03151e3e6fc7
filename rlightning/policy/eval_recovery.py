"""Dead eval workers: finding them, relaunching them and catching them up with the current weights.

`EvalRecovery` is held by a `PolicyGroup` and owns the recovery state (how to
relaunch a worker, how many times each was restarted, the ``setup`` arguments
and acting mode a new worker needs). It reads the group only through
`RecoveryHost`: the worker lists, the weight version, and
``replace_eval_worker``, which puts a relaunched worker into its slot (rollout
router, placement, weight sync). A relaunched eval worker builds its network
and loads train rank 0's current weights (or a live eval worker's).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence

from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, is_actor_death, resolve_one

__all__ = ["EvalRecovery", "RecoveryHost", "WorkerLostError"]

logger = get_logger(__name__)


class WorkerLostError(RuntimeError):
    """A policy worker actor died and the group cannot carry on without it.

    Attributes:
        role: ``train`` or ``eval``.
        index: The worker's index in its role.
        checkpoint: The run's last checkpoint folder when the engine raised it (None: none was saved).
    """

    def __init__(self, message: str, role: str, index: int, checkpoint: Optional[str] = None) -> None:
        super().__init__(message)
        self.role = role
        self.index = index
        self.checkpoint = checkpoint


class RecoveryHost(Protocol):
    """What `EvalRecovery` needs from the group it serves."""

    train_workers: List[WorkerHandle]
    eval_workers: List[WorkerHandle]
    weight_version: int

    def replace_eval_worker(self, index: int, worker: WorkerHandle, placement: Dict[str, Any]) -> None:
        """Put a relaunched eval worker in slot ``index`` (router, placement, weight sync)."""


class EvalRecovery:
    """Finds dead eval worker actors, relaunches them and catches them up with the current weights.

    Args:
        host: The group whose eval workers this recovers.
        num_eval_workers: Eval worker slots (restart counts are kept per slot).
        max_restarts: Relaunches allowed per slot (``PolicyConfig.max_restarts``).
    """

    def __init__(self, host: RecoveryHost, num_eval_workers: int, max_restarts: int) -> None:
        self._host = host
        self.max_restarts = int(max_restarts)
        self.restarts: List[int] = [0] * int(num_eval_workers)
        """Relaunches per eval worker slot."""
        self._relaunch: Optional[Callable[[int], Any]] = None
        self._setup_args: Optional[tuple] = None
        self._deterministic: Optional[bool] = None
        self._lock = threading.Lock()

    def set_relauncher(self, relaunch: Optional[Callable[[int], Any]]) -> None:
        """How to start a fresh eval worker actor ``i`` (the builder sets it for remote eval workers)."""
        self._relaunch = relaunch

    def record_setup(self, env_meta: Any, seed: Optional[int]) -> None:
        """The ``setup`` arguments a relaunched worker is built with."""
        self._setup_args = (env_meta, seed)

    def record_deterministic(self, deterministic: bool) -> None:
        """The acting mode a relaunched worker is given."""
        self._deterministic = bool(deterministic)

    def dead_workers(self, role: str = "eval", timeout: float = 60.0) -> List[int]:
        """Indices of the Ray actors of ``role`` (``train`` or ``eval``) that are dead (one cheap call each).

        A worker busy past ``timeout`` counts as alive.
        """
        workers: Sequence[WorkerHandle] = self._host.train_workers if role == "train" else self._host.eval_workers
        remote = [(i, w) for i, w in enumerate(workers) if w.is_remote]
        futures = [(i, w.submit("get_node_ip")) for i, w in remote]
        dead = []
        for i, fut in futures:
            try:
                resolve_one(fut, timeout=timeout)
            except Exception as err:  # noqa: BLE001 - only deaths count; a timeout means busy
                if is_actor_death(err):
                    dead.append(i)
        return dead

    def restart_dead(self, cause: Optional[BaseException] = None) -> List[int]:
        """Relaunch every dead eval worker, build its network and give it the current weights.

        Returns:
            The indices restarted (empty: every eval worker is alive, so the failure was elsewhere).

        Raises:
            WorkerLostError: a worker died more than ``max_restarts`` times, or no relauncher
                is set (eval workers built by hand), or no live worker holds weights to copy.
        """
        with self._lock:
            dead = self.dead_workers("eval")
            for i in dead:
                self._restart(i, cause)
            return dead

    def _restart(self, i: int, cause: Optional[BaseException]) -> None:
        limit = self.max_restarts
        if self._relaunch is None:
            raise WorkerLostError(
                f"eval worker {i} died and this group has no way to relaunch it (built without the builder); "
                "build the policy group with build_policy_group",
                "eval",
                i,
            ) from cause
        if self.restarts[i] >= limit:
            raise WorkerLostError(
                f"eval worker {i} died and was already restarted {self.restarts[i]} time(s); "
                f"max_restarts={limit} reached (raise policy.max_restarts to allow more)",
                "eval",
                i,
            ) from cause
        logger.warning("eval worker %d died (%s); restarting it", i, type(cause).__name__ if cause else "dead")
        self._host.eval_workers[i].kill()
        self.restarts[i] += 1
        new = WorkerHandle(self._relaunch(i))
        try:
            placement = new.call("get_placement_info")
            if self._setup_args is not None:
                new.call("setup", *self._setup_args)
                self._catch_up(new, skip=i)
            if self._deterministic is not None:
                new.call("set_deterministic", self._deterministic)
        except BaseException:
            new.kill()
            raise
        self._host.replace_eval_worker(i, new, placement)

    def _catch_up(self, new: WorkerHandle, skip: int) -> None:
        """Load the current weights into a relaunched eval worker (from train rank 0, or a live eval worker)."""
        import ray

        host = self._host
        source = host.train_workers[0] if host.train_workers else None
        if source is None:
            dead = set(self.dead_workers("eval"))
            alive = [w for j, w in enumerate(host.eval_workers) if j != skip and j not in dead]
            if not alive:
                raise WorkerLostError(
                    "every eval worker died and there is no train worker to copy weights from", "eval", skip
                )
            source = alive[0]
        version = host.weight_version
        if source.is_remote:
            ref = source.submit("export_weights", version)
        else:
            ref = ray.put(source.call("export_weights", version))
        new.call("load_state_dict", ref, version)
