"""Weight sync strategies: how train rank 0's weights reach the eval workers.

- ``object_store``: train rank 0 exports a numpy state dict once into the Ray
  object store; every eval worker loads it (zero-copy reads on the same node).
- ``collective``: a torch.distributed broadcast from train rank 0 over a group
  of it and the eval workers (nccl on GPUs, gloo otherwise), through one flat
  preallocated buffer per dtype.
- ``colocated`` / local: workers in the calling process copy tensors directly.

`plan_weight_sync` picks what can run for the workers at hand and says why
when it differs from what the config asked for.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, resolve

logger = get_logger(__name__)

STRATEGIES = ("object_store", "collective", "colocated")


def plan_weight_sync(
    configured: str,
    train0: Optional[WorkerHandle],
    evals: Sequence[WorkerHandle],
    is_colocated: bool = False,
) -> Tuple[str, str]:
    """Choose the sync that runs for these workers.

    Args:
        configured: ``PolicyConfig.weight_sync``.
        train0: Train rank 0 (None: no train worker, nothing to sync).
        evals: The eval workers.
        is_colocated: Comm groups hold train workers only (no collective sync).

    Returns:
        (effective, reason): ``none``, ``local_copy`` / ``colocated`` (the same direct copy),
        ``object_store`` or ``collective``,
        and why it differs from ``configured`` (empty when it does not).

    Raises:
        ValueError: an unknown strategy name.
    """
    if configured not in STRATEGIES:
        raise ValueError(f"weight_sync={configured!r} is not a weight sync strategy; use one of {STRATEGIES}")
    if train0 is None or not evals:
        return "none", "no eval workers: train worker 0 answers rollouts itself"
    remote = [train0.is_remote] + [e.is_remote for e in evals]
    if not any(remote):
        if configured == "colocated":
            return "colocated", ""
        return "local_copy", "all workers are in this process: direct copy"
    if configured == "colocated":
        return "object_store", "colocated needs eval and train in one process; these are separate Ray actors"
    if configured == "collective":
        if not all(remote):
            return "object_store", "collective needs train rank 0 and every eval worker to be Ray actors"
        if is_colocated:
            return "object_store", "is_colocated: comm groups hold train workers only"
    return configured, ""


class WeightSync:
    """Base of the strategies.

    Args:
        train: Train worker handles (rank 0 first).
        evals: Eval worker handles.
    """

    name = "base"

    def __init__(self, train: List[WorkerHandle], evals: List[WorkerHandle]) -> None:
        self.train = train
        self.evals = evals

    def prepare(self, setup_results: Dict[str, List[Dict[str, Any]]]) -> None:
        """Called once the networks exist, with each worker's ``setup`` result."""

    def _other_train_versions(self, version: int) -> List[Any]:
        return [t.submit("set_weight_version", version) for t in self.train[1:]]

    def push(self, version: int) -> None:
        """Bring every eval worker to train rank 0's weights, tagged ``version``."""
        raise NotImplementedError


class NoEvalSync(WeightSync):
    """No eval workers: only the version advances (train workers answer rollouts)."""

    name = "none"

    def push(self, version: int) -> None:
        resolve([t.submit("set_weight_version", version) for t in self.train])


class LocalCopySync(WeightSync):
    """Workers in this process: eval copies the train worker's tensors directly."""

    name = "local_copy"

    def push(self, version: int) -> None:
        if self.train[0].is_remote or any(e.is_remote for e in self.evals):  # never planned this way
            raise RuntimeError("a direct-copy weight sync needs train rank 0 and the eval workers in this process")
        futures = self._other_train_versions(version)
        src = self.train[0].worker
        with self.train[0].lock:
            src.set_weight_version(version)
        for e in self.evals:  # locks taken eval, then train: the one place that holds two
            with e.lock, self.train[0].lock:
                e.worker.copy_weights_from(src, version)
        resolve(futures)


class ObjectStoreSync(WeightSync):
    """Train rank 0 puts a numpy state dict in the Ray object store once; eval workers load it."""

    name = "object_store"

    def push(self, version: int) -> None:
        import ray

        t0 = self.train[0]
        if t0.is_remote:
            ref = t0.submit("export_weights", version)
        else:
            with t0.lock:
                weights = t0.worker.export_weights(version)
            ref = ray.put(weights)
        futures = self._other_train_versions(version)
        local_evals = [e for e in self.evals if not e.is_remote]
        futures += [e.submit("load_state_dict", ref, version) for e in self.evals if e.is_remote]
        if local_evals:
            weights = ray.get(ref)
            for e in local_evals:
                with e.lock:
                    e.worker.load_state_dict(weights, version)
        resolve(futures)  # an export failure surfaces through the loads that depend on it


class CollectiveSync(WeightSync):
    """torch.distributed broadcast from train rank 0 to the eval workers."""

    name = "collective"

    def prepare(self, setup_results: Dict[str, List[Dict[str, Any]]]) -> None:
        """Check that train rank 0 and every eval worker built the same weight layout.

        Raises:
            ValueError: a layout differs or a worker has no broadcast buffer.
        """
        sig0 = setup_results["train"][0].get("weight_signature")
        sigs = [r.get("weight_signature") for r in setup_results["eval"]]
        if sig0 is None or any(s is None for s in sigs):
            raise ValueError("collective weight sync: a worker has no broadcast buffer (init_comm_group not run?)")
        bad = [i for i, s in enumerate(sigs) if s != sig0]
        if bad:
            raise ValueError(
                f"collective weight sync: eval workers {bad} built networks with a different layout than "
                "train rank 0; they must use the same policy class and env spaces"
            )

    def push(self, version: int) -> None:
        futures = [self.train[0].submit("broadcast_weights", version)]
        futures += [e.submit("receive_weights", version) for e in self.evals]
        futures += self._other_train_versions(version)
        resolve(futures)


def make_weight_sync(effective: str, train: List[WorkerHandle], evals: List[WorkerHandle]) -> WeightSync:
    """The strategy object for an effective sync name from `plan_weight_sync`."""
    classes = {c.name: c for c in (NoEvalSync, LocalCopySync, ObjectStoreSync, CollectiveSync)}
    classes["colocated"] = LocalCopySync
    sync = classes[effective](train, evals)
    sync.name = effective
    return sync
