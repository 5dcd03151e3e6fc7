"""Dead eval workers: finding them, relaunching them and catching them up with the current weights.

Part of `PolicyGroup` (a mixin over its workers, router, sync strategy and the
``setup`` arguments it recorded). A relaunched eval worker builds its network,
loads train rank 0's current weights (or a live eval worker's), and takes over
its slot in the rollout router; a collective weight sync falls back to the
object store, since the new actor is not in the broadcast group.
"""

from __future__ import annotations

from typing import Any, Callable, List, Optional

from rlightning.policy.weight_sync import make_weight_sync
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, is_actor_death, resolve_one

__all__ = ["EvalRecovery", "WorkerLostError"]

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


class EvalRecovery:
    """Dead worker handling for `PolicyGroup` (uses its ``train_workers``, ``eval_workers``, ``_router``,
    ``_sync``, ``_sync_plan``, ``_placement``, ``_setup_args``, ``_deterministic``, ``_eval_restarts``,
    ``_relaunch_eval``, ``_restart_lock``, ``weight_version`` and ``config``)."""

    def set_eval_relauncher(self, relaunch: Optional[Callable[[int], Any]]) -> None:
        """How to start a fresh eval worker actor ``i`` (the builder sets it for remote eval workers)."""
        self._relaunch_eval = relaunch

    def dead_workers(self, role: str = "eval", timeout: float = 60.0) -> List[int]:
        """Indices of the Ray actors of ``role`` (``train`` or ``eval``) that are dead (one cheap call each).

        A worker busy past ``timeout`` counts as alive.
        """
        workers = self.train_workers if role == "train" else self.eval_workers
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

    def restart_dead_eval_workers(self, cause: Optional[BaseException] = None) -> List[int]:
        """Relaunch every dead eval worker, build its network and give it the current weights.

        Returns:
            The indices restarted (empty: every eval worker is alive, so the failure was elsewhere).

        Raises:
            WorkerLostError: a worker died more than ``PolicyConfig.max_restarts`` times, or no relauncher
                is set (eval workers built by hand), or no live worker holds weights to copy.
        """
        with self._restart_lock:
            dead = self.dead_workers("eval")
            for i in dead:
                self._restart_eval(i, cause)
            return dead

    def _restart_eval(self, i: int, cause: Optional[BaseException]) -> None:
        limit = self.config.max_restarts
        if self._relaunch_eval is None:
            raise WorkerLostError(
                f"eval worker {i} died and this group has no way to relaunch it (built without the builder); "
                "build the policy group with build_policy_group",
                "eval",
                i,
            ) from cause
        if self._eval_restarts[i] >= limit:
            raise WorkerLostError(
                f"eval worker {i} died and was already restarted {self._eval_restarts[i]} time(s); "
                f"max_restarts={limit} reached (raise policy.max_restarts to allow more)",
                "eval",
                i,
            ) from cause
        logger.warning("eval worker %d died (%s); restarting it", i, type(cause).__name__ if cause else "dead")
        self.eval_workers[i].kill()
        self._eval_restarts[i] += 1
        new = WorkerHandle(self._relaunch_eval(i))
        try:
            self._placement["eval"][i] = new.call("get_placement_info")
            if self._setup_args is not None:
                new.call("setup", *self._setup_args)
                self._catch_up(new, skip=i)
            if self._deterministic is not None:
                new.call("set_deterministic", self._deterministic)
        except BaseException:
            new.kill()
            raise
        self.eval_workers[i] = new
        self._router.workers[i] = new
        self._router.forget_worker(i)
        if self._sync is not None and self._sync.name == "collective":
            # The new actor is not in the broadcast group; the object store reaches every eval worker.
            logger.warning("weight sync switches from collective to object_store: eval worker %d was restarted", i)
            self._sync = make_weight_sync("object_store", self.train_workers, self.eval_workers)
            self._sync_plan = dict(self._sync_plan or {}, effective="object_store", reason=f"eval worker {i} restarted")

    def _catch_up(self, new: WorkerHandle, skip: int) -> None:
        """Load the current weights into a relaunched eval worker (from train rank 0, or a live eval worker)."""
        import ray

        source = self.train_workers[0] if self.train_workers else None
        if source is None:
            dead = set(self.dead_workers("eval"))
            alive = [w for j, w in enumerate(self.eval_workers) if j != skip and j not in dead]
            if not alive:
                raise WorkerLostError(
                    "every eval worker died and there is no train worker to copy weights from", "eval", skip
                )
            source = alive[0]
        version = self.weight_version
        if source.is_remote:
            ref = source.submit("export_weights", version)
        else:
            ref = ray.put(source.call("export_weights", version))
        new.call("load_state_dict", ref, version)
