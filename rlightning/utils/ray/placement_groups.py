"""Placement on the nodes of a Ray cluster: where actors landed, node affinity, train placement groups.

    nodes = actor_node_ids(env_group.workers.values())          # Ray node id of each env worker
    storage_nodes = storage_nodes_for(nodes, num_storages=2)    # shards on the env workers' nodes
    options = [node_affinity_options(n) for n in storage_nodes] # one NodeAffinitySchedulingStrategy each
    pg = TrainPlacement(2, num_cpus=1, strategy="SPREAD")       # train workers gathered for their collective
    pg.options(0)                                                # scheduling strategy of bundle 0

Node affinity here is always *soft*: a shard relaunched after its node died is
placed on a surviving node instead of waiting for the dead one.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

from rlightning.utils.logger import get_logger
from rlightning.utils.ray.launcher import import_ray

__all__ = [
    "PG_STRATEGIES",
    "TrainPlacement",
    "actor_node_ids",
    "buffer_placement",
    "component_distribution",
    "node_affinity_options",
    "storage_nodes_for",
]

logger = get_logger(__name__)

#: Placement group strategies Ray accepts.
PG_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")


def _node_id(_self: Any = None) -> str:
    import ray

    return ray.get_runtime_context().get_node_id()


def _is_actor(worker: Any) -> bool:
    from rlightning.utils.ray.handle import WorkerHandle

    if isinstance(worker, WorkerHandle):
        return worker.is_remote
    return hasattr(worker, "_actor_id") and hasattr(worker, "__ray_call__")


def actor_node_ids(workers: Iterable[Any], timeout: float = 120.0) -> List[Optional[str]]:
    """The Ray node id each worker runs on, asked inside each actor (one round trip for all).

    A worker in this process gets the driver's node id (None when Ray is not initialised).

    Args:
        workers: Ray actor handles, `WorkerHandle` objects or local worker objects.
        timeout: Seconds to wait for the answers.
    """
    from rlightning.utils.ray.handle import WorkerHandle

    workers = [w.worker if isinstance(w, WorkerHandle) else w for w in workers]
    ray = import_ray() if any(_is_actor(w) for w in workers) else None
    local = None
    try:
        import ray as _ray

        if _ray.is_initialized():
            local = _node_id()
    except ImportError:  # pragma: no cover - ray is a dependency
        pass
    refs = {i: w.__ray_call__.remote(_node_id) for i, w in enumerate(workers) if _is_actor(w)}
    answers = dict(zip(refs, ray.get(list(refs.values()), timeout=timeout))) if refs else {}
    return [answers.get(i, local) for i in range(len(workers))]


def storage_nodes_for(env_nodes: Sequence[Optional[str]], num_storages: int) -> List[Optional[str]]:
    """Place ``num_storages`` shards on the nodes the env workers landed on, in proportion to their env workers.

    Each node with env workers gets at least one shard while shards last (most env workers first);
    the rest go to the nodes with the most env workers per shard. Deterministic for the same input.

    Raises:
        ValueError: ``num_storages < 1``.
    """
    if isinstance(num_storages, bool) or not isinstance(num_storages, int) or num_storages < 1:
        raise ValueError(f"num_storages must be an integer >= 1, got {num_storages!r}")
    counts: Dict[Optional[str], int] = {}
    for n in env_nodes:
        counts[n] = counts.get(n, 0) + 1
    if not counts:
        return [None] * num_storages
    order = sorted(counts, key=lambda n: (-counts[n], str(n)))
    shards = {n: 1 if i < num_storages else 0 for i, n in enumerate(order)}
    for _ in range(num_storages - sum(shards.values())):
        node = max(order, key=lambda n: (counts[n] / (shards[n] + 1), -order.index(n)))
        shards[node] += 1
    return [n for n in order for _ in range(shards[n])]


def node_affinity_options(node_id: Optional[str]) -> Dict[str, Any]:
    """Ray actor options placing an actor on ``node_id`` (soft: elsewhere when that node is gone); {} for None."""
    if node_id is None:
        return {}
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=True)}


def component_distribution(
    env_nodes: Dict[str, Optional[str]],
    storage_nodes: Sequence[Optional[str]],
    train_nodes: Sequence[Optional[str]] = (),
) -> Dict[str, Dict[str, Dict[str, Any]]]:
    """The `EpisodeTable` ``component_distribution`` from the node ids of envs, shards and train workers."""
    return {
        "env": {str(e): {"node_id": n} for e, n in env_nodes.items()},
        "storage": {str(i): {"node_id": n} for i, n in enumerate(storage_nodes)},
        "train": {str(i): {"node_id": n} for i, n in enumerate(train_nodes)},
    }


class TrainPlacement:
    """A Ray placement group with one bundle per train worker, so their collective runs on reserved resources.

    Args:
        num_workers: Train workers (bundles).
        num_cpus: CPUs per bundle.
        num_gpus: GPUs per bundle.
        resources: Custom Ray resources per bundle (``{"node_a": 1}`` pins the bundles to such nodes).
        strategy: ``PACK`` (few nodes), ``SPREAD`` (many nodes), ``STRICT_PACK`` or ``STRICT_SPREAD``.
        timeout: Seconds to wait for the reservation before failing.

    Raises:
        ValueError: an unknown strategy, or a reservation the cluster cannot make within ``timeout``
            (the message names the bundles and the cluster's resources).
    """

    def __init__(
        self,
        num_workers: int,
        num_cpus: float = 1.0,
        num_gpus: float = 0.0,
        resources: Optional[Dict[str, float]] = None,
        strategy: str = "PACK",
        timeout: float = 120.0,
    ) -> None:
        if strategy not in PG_STRATEGIES:
            raise ValueError(f"placement group strategy {strategy!r} is not one of {PG_STRATEGIES}")
        ray = import_ray()
        from ray.util.placement_group import placement_group, remove_placement_group

        bundle: Dict[str, float] = {k: float(v) for k, v in (resources or {}).items()}
        if num_cpus:
            bundle["CPU"] = float(num_cpus)
        if num_gpus:
            bundle["GPU"] = float(num_gpus)
        if not bundle:
            bundle = {"CPU": 0.001}  # a bundle needs some resource; the workers then fit anywhere
        self.bundles = [dict(bundle) for _ in range(num_workers)]
        self.strategy = strategy
        self._remove = remove_placement_group
        self.pg = placement_group(self.bundles, strategy=strategy)
        ready, _ = ray.wait([self.pg.ready()], timeout=timeout)
        if not ready:
            self.remove()
            raise ValueError(
                f"the cluster cannot reserve {num_workers} train-worker bundles {bundle} with strategy {strategy} "
                f"within {timeout:g}s; it has {ray.cluster_resources()}; lower cluster.train_each_*_num, "
                "cluster.train_resources or train_worker_num, or use strategy PACK"
            )
        logger.info("train placement group: %d bundles %s, %s", num_workers, bundle, strategy)

    def options(self, index: int) -> Dict[str, Any]:
        """Ray actor options that put train worker ``index`` in its bundle."""
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        return {
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=index
            )
        }

    def remove(self) -> None:
        """Release the reservation (idempotent)."""
        if self.pg is not None:
            try:
                self._remove(self.pg)
            except Exception as err:  # noqa: BLE001 - a cluster already gone
                logger.debug("removing the train placement group failed: %r", err)
            self.pg = None

    def __repr__(self) -> str:
        return f"TrainPlacement({len(self.bundles)} x {self.bundles[0] if self.bundles else {}}, {self.strategy})"


def buffer_placement(config: Any, env_group: Any, policy_group: Any) -> Dict[str, Any]:
    """`DataBuffer.init` keyword arguments placing a run's storage shards (``storage_options``, the distribution).

    Without ``buffer.node_affinity_env`` or without remote shards: one ``storage_options`` for all shards
    and no distribution (as before). With it: the node each env worker (and train worker) actually
    landed on, asked inside the actors; shards placed on those nodes (`storage_nodes_for`), each with a
    soft `NodeAffinitySchedulingStrategy`; the `EpisodeTable` binds envs (and, with
    ``buffer.node_affinity_train``, train workers) to shards on their node.

    Args:
        config: The run's `MainConfig`.
        env_group: The initialised `EnvGroup` (its ``workers``).
        policy_group: The `PolicyGroup` (its ``train_workers``).
    """
    c, b = config.cluster, config.buffer
    base = {"num_cpus": c.buffer_each_cpu_num}
    if not (b.node_affinity_env and c.remote_storage):
        if b.node_affinity_env or b.node_affinity_train:
            logger.warning("buffer.node_affinity_* needs cluster.remote_storage=true; shards stay in this process")
        return {"storage_options": base}
    workers = env_group.workers
    env_nodes = dict(zip(workers, actor_node_ids(workers.values())))
    train_handles = list(getattr(policy_group, "train_workers", []) or [])
    train_nodes = actor_node_ids(train_handles) if b.node_affinity_train else []
    nodes = storage_nodes_for(list(env_nodes.values()), c.buffer_worker_num)
    logger.info("storage shards placed on nodes %s (env workers on %s)", nodes, sorted(set(env_nodes.values())))
    return {
        "storage_options": [dict(base, **node_affinity_options(n)) for n in nodes],
        "component_distribution": component_distribution(env_nodes, nodes, train_nodes),
        "node_affinity_env": True,
        "node_affinity_train": bool(b.node_affinity_train),
    }
