"""`EnvWorkerSync`: train weights to the env workers' policy copies, by the strategies eval workers use.

With ``cluster.inference="env_workers"`` the acting policy is placed inside the
env workers instead of in eval workers; everything else stays the same: the
weight-sync strategy is planned from ``policy.weight_sync`` by the same
`plan_weight_sync` and run by the same `WeightSync` classes (each env worker's
handle stands where an eval worker's would), versions are the policy group's,
and a relaunched env worker gets its copy and train rank 0's current weights
(``object_store``), as a relaunched eval worker does:

- ``local_copy`` / ``colocated``: env workers and train rank 0 in this process:
  tensors copied in place (no numpy export);
- ``object_store``: train rank 0 puts its weights in the object store once
  (a Ray train worker does it itself), every Ray env worker reads them there;
- ``collective``: the env workers are not members of the broadcast group, so
  it falls back to ``object_store`` (logged, with the reason in `plan`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from rlightning.policy.weight_sync import make_weight_sync, plan_weight_sync
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle

logger = get_logger(__name__)

__all__ = ["EnvWorkerSync"]


class EnvWorkerSync:
    """Keeps the env group's policy copies at the policy group's acting weights.

    Args:
        env_group: An initialised `EnvGroup` whose workers have a policy attached.
        policy_group: The run's `PolicyGroup` (train rank 0 is the source; without train workers,
            eval worker 0's weights are loaded through the object store).
        configured: ``PolicyConfig.weight_sync``.
        is_colocated: ``ClusterConfig.is_colocated``.
    """

    def __init__(self, env_group: Any, policy_group: Any, configured: str, is_colocated: bool = False) -> None:
        self.env_group = env_group
        self.policy_group = policy_group
        self.version: Optional[int] = None
        train = policy_group.train_workers
        handles = env_group.policy_handles()
        effective, reason = plan_weight_sync(configured, train[0] if train else None, handles, is_colocated)
        if effective == "collective":
            effective, reason = "object_store", "the env workers are not members of the weight broadcast group"
        if reason and effective in ("object_store",) and effective != configured:
            logger.info("env workers' weight_sync=%r falls back to %r: %s", configured, effective, reason)
        self.plan: Dict[str, str] = {"configured": configured, "effective": effective, "reason": reason}
        env_group.set_policy_catch_up(self._catch_up)

    @property
    def effective(self) -> str:
        """The strategy that runs: ``local_copy``, ``colocated``, ``object_store`` or ``none`` (no train worker)."""
        return self.plan["effective"]

    def push(self, version: int) -> None:
        """Bring every env worker's policy copy to train rank 0's weights, tagged ``version``."""
        version = int(version)
        if self.effective == "none":  # no train worker: the eval workers' weights, through the store
            self.env_group.load_policy_weights(self.policy_group.weights_ref(), version)
        else:
            sync = make_weight_sync(self.effective, self.policy_group.train_workers, self.env_group.policy_handles())
            sync.push(version)
        self.version = version

    def _catch_up(self, handle: WorkerHandle) -> None:
        """A relaunched env worker (its copy just rebuilt) loads the current weights at the current version."""
        if self.version is None:
            return
        train = self.policy_group.train_workers
        if not train:
            handle.call("load_policy_weights", self.policy_group.get_weights(), self.version)
            return
        make_weight_sync("object_store", train, [handle]).push(self.version)
