"""`PolicyCopies`: the policy copies in an `EnvGroup`'s workers (``cluster.inference="env_workers"``).

The group holds one (composition): it builds the copy in every worker, loads
weights into them, and re-arms a relaunched worker with the same copy and the
current weights, so the group's restart code calls one method::

    group.attach_policy(PPOPolicy, cfg.policy, metas[0], seed=0)   # PolicyCopies.attach
    group.load_policy_weights(weights, version=1)                   # PolicyCopies.load
    for env_id, result in group.collect_rollouts(128):             # result.record: [N, 128] TensorDict
        buffer.add_rollout(result.record)

Which weight-sync strategy brings weights to the copies is the engine's choice
(`rlightning.engine.acting.EnvWorkerSync`, the strategies eval workers use);
it may register a ``catch_up`` function that a relaunched worker is brought up
to date with, instead of the last weights `load` saw. Nothing here imports the
policy package: `attach` takes the policy side's `PolicyCopyFactory` (or a
policy class, whose factory it asks for) and sends that one factory to every
worker, and again to a relaunched one (`rlightning.env.acting_policy`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from rlightning.env.acting_policy import PolicyCopyFactory, as_copy_factory
from rlightning.env.errors import caller_error
from rlightning.types import EnvMeta, is_object_ref
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, resolve

logger = get_logger(__name__)

__all__ = ["PolicyCopies"]


class PolicyCopies:
    """How the workers' policy copies were built (their factory) and which weights they were given last."""

    def __init__(self) -> None:
        self.factory: Optional[PolicyCopyFactory] = None
        self.weights: Optional[Tuple[Any, int]] = None
        self.catch_up: Optional[Callable[[WorkerHandle], None]] = None

    @property
    def attached(self) -> bool:
        """True once `attach` built a copy in every worker."""
        return self.factory is not None

    def attach(
        self,
        handles: Sequence[WorkerHandle],
        policy: Any,
        policy_config: Any = None,
        env_meta: Optional[EnvMeta] = None,
        seed: Optional[int] = None,
    ) -> List[Dict[str, Any]]:
        """Build an eval-role copy in every worker with one factory (see `RolloutWorker.attach_policy`).

        Raises:
            TypeError, ValueError: as `as_copy_factory`, before any worker is called.
        """
        try:
            factory = as_copy_factory(policy, policy_config, env_meta, seed)
        except (TypeError, ValueError) as err:
            caller_error(err)
            raise
        results = resolve([h.submit("attach_policy", factory) for h in handles])
        self.factory = factory
        self.weights = None
        name = getattr(policy, "__name__", None) or type(factory).__name__
        logger.info("policy %s attached to %d env workers", name, len(handles))
        return results

    def load(self, handles: Sequence[WorkerHandle], weights: Any, weight_version: int, remote: bool) -> None:
        """Load ``weights`` (a dict of arrays or its ObjectRef) into every copy.

        Ray workers read one object-store copy (a dict is put there once); local workers get the dict.

        Raises:
            RuntimeError: nothing attached.
        """
        if self.factory is None:
            raise RuntimeError("load_policy_weights needs attach_policy first")
        payload = weights
        if remote != is_object_ref(weights):
            import ray

            payload = ray.put(weights) if remote else ray.get(weights)
        version = int(weight_version)
        self.weights = (payload, version)
        resolve([h.submit("load_policy_weights", payload, version) for h in handles])

    def rearm(self, handle: WorkerHandle) -> None:
        """Give a relaunched worker its policy copy and the current weights back (the restart path)."""
        if self.factory is None:
            return
        handle.call("attach_policy", self.factory)
        if self.catch_up is not None:
            self.catch_up(handle)
        elif self.weights is not None:
            handle.call("load_policy_weights", *self.weights)
