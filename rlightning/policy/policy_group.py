"""`PolicyGroup`: train and eval policy workers behind one object.

The workers are local objects or Ray actors (the builder decides); the group
talks to both through the call layer (``WorkerHandle``, ``resolve``). Order of
use, as the builder and the engines call it:

1. ``init_placement_info`` -> ``init_weight_buffer`` -> ``init_comm_group``
   (the builder, before the env spaces are known: only decisions and process
   groups, no tensors);
2. ``construct_network(env_meta)`` (the engine, once the env group reported
   its `EnvMeta`): every worker builds its networks, the weight broadcast
   buffers are allocated, and eval workers receive train rank 0's weights;
3. per iteration: ``rollout_batch`` ... ``update_dataset`` -> ``train`` ->
   ``sync_weights``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from rlightning.policy.comm import BACKENDS, choose_backend
from rlightning.policy.eval_recovery import EvalRecovery, WorkerLostError
from rlightning.policy.routing import RolloutRouter
from rlightning.policy.weight_sync import make_weight_sync, plan_weight_sync
from rlightning.types import BatchedData, EnvMeta, is_object_ref
from rlightning.utils.config import PolicyConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, is_actor_death, resolve, resolve_one

__all__ = ["PolicyGroup", "WorkerLostError"]

logger = get_logger(__name__)


class PolicyGroup:
    """Train workers (data-parallel) and eval workers (acting), with weight sync between them.

    Args:
        train_policy_list: Train workers (policy objects or Ray actor handles), rank 0 first.
        eval_policy_list: Eval workers; empty means train worker 0 answers rollouts.
        config: The policy config (rollout mode, weight sync strategy).

    Raises:
        TypeError: ``config`` is not a `PolicyConfig`.
        ValueError: no workers at all, or several train workers in this process.
    """

    def __init__(self, train_policy_list: Sequence[Any], eval_policy_list: Sequence[Any], config: PolicyConfig) -> None:
        if not isinstance(config, PolicyConfig):
            raise TypeError(f"PolicyGroup(config=...) needs a PolicyConfig, got {type(config).__name__}")
        self.train_workers = [WorkerHandle(w) for w in train_policy_list]
        self.eval_workers = [WorkerHandle(w) for w in eval_policy_list]
        if not self.train_workers and not self.eval_workers:
            raise ValueError("PolicyGroup needs at least one train or eval worker")
        local_train = [t for t in self.train_workers if not t.is_remote]
        if len(self.train_workers) > 1 and local_train:
            raise ValueError(
                f"train_worker_num={len(self.train_workers)} with train workers in this process: data-parallel "
                "training needs one process per worker; set cluster.remote_train=True or train_worker_num=1"
            )
        self.config = config
        self.weight_version = 0
        self.is_colocated = False
        self._router = RolloutRouter(self.eval_workers or self.train_workers[:1], config.rollout_mode)
        self._placement: Dict[str, List[Dict[str, Any]]] = {"train": [], "eval": []}
        self._sync_plan: Optional[Dict[str, str]] = None
        self._sync = None
        self._comm: Dict[str, Any] = {"world_size": 0}
        self._network: Dict[str, Any] = {}
        self._last_metrics: Dict[str, float] = {}
        self._counters = {"train_calls": 0, "sync_count": 0, "rollout_calls": 0, "rollout_items": 0}
        self._last_sync_s: Optional[float] = None
        self._last_sync_time: Optional[float] = None
        self._closed = False
        # Fault handling: relaunching dead eval worker actors (it owns its state, and calls replace_eval_worker).
        self.recovery = EvalRecovery(self, len(self.eval_workers), config.max_restarts)
        self._rendezvous_file: Optional[Path] = None
        #: The train workers' placement group (`TrainPlacement`) when the builder made one; removed by `shutdown`.
        self.train_placement: Any = None

    # ------------------------------------------------------------------ setup

    @property
    def rollout_workers(self) -> List[WorkerHandle]:
        """The workers that compute actions: the eval workers, or train worker 0 without any."""
        return self.eval_workers or self.train_workers[:1]

    def init_placement_info(self, is_colocated: bool = False) -> Dict[str, List[Dict[str, Any]]]:
        """Ask every worker where it runs (node, GPUs, pid, device); one round trip for all.

        Args:
            is_colocated: Train and eval share processes; comm groups then hold train workers only.
        """
        self.is_colocated = bool(is_colocated)
        futures = [w.submit("get_placement_info") for w in self.train_workers + self.eval_workers]
        infos = resolve(futures)
        n = len(self.train_workers)
        self._placement = {"train": infos[:n], "eval": infos[n:]}
        return self._placement

    def init_weight_buffer(self) -> str:
        """Decide the weight sync strategy; the buffers themselves are allocated in `construct_network`.

        The networks (and so the buffer sizes) exist only once the env spaces are
        known, so this records the plan: which strategy runs for these workers and
        why it differs from ``config.weight_sync`` when it does.

        Returns:
            The effective strategy: ``none``, ``local_copy``, ``colocated``, ``object_store`` or ``collective``.
        """
        train0 = self.train_workers[0] if self.train_workers else None
        effective, reason = plan_weight_sync(self.config.weight_sync, train0, self.eval_workers, self.is_colocated)
        if reason and effective not in ("none", "local_copy", "colocated") and effective != self.config.weight_sync:
            logger.warning("weight_sync=%r falls back to %r: %s", self.config.weight_sync, effective, reason)
        self._sync_plan = {"configured": self.config.weight_sync, "effective": effective, "reason": reason}
        return effective

    def init_comm_group(self, backend: str = "nccl", is_colocated: bool = False) -> Dict[str, Any]:
        """Create the torch.distributed groups the workers need.

        A data-parallel group over the train workers when there are several, and
        a broadcast group of train rank 0 and the eval workers when weights sync
        by ``collective``. nccl is used only where every member has its own GPU
        with CUDA; otherwise gloo, with a log line.

        Args:
            backend: ``nccl``, ``gloo`` or ``auto``.
            is_colocated: Comm groups hold train workers only.

        Raises:
            ValueError: an unknown backend.
        """
        if backend not in BACKENDS:
            raise ValueError(f"backend={backend!r} is not a torch.distributed backend here; use one of {BACKENDS}")
        if is_colocated and not self.is_colocated:
            self.is_colocated = True
            self._sync_plan = None
        if not self._placement["train"] and not self._placement["eval"]:
            self.init_placement_info(self.is_colocated)
        if self._sync_plan is None:
            self.init_weight_buffer()
        ddp = len(self.train_workers) > 1
        bcast = self._sync_plan["effective"] == "collective"
        if not ddp and not bcast:
            self._comm = {"world_size": 0}
            return dict(self._comm)
        trains = self.train_workers if ddp else self.train_workers[:1]
        evals = self.eval_workers if bcast else []
        members = trains + evals
        train_ranks = list(range(len(trains)))
        bcast_ranks = [0] + list(range(len(trains), len(members))) if bcast else []
        ddp_backend, ddp_reason = choose_backend(backend, self._placement["train"], "data-parallel")
        bcast_place = self._placement["train"][:1] + self._placement["eval"]
        bcast_backend, bcast_reason = choose_backend(backend, bcast_place, "weight broadcast") if bcast else (None, "")
        address = trains[0].call("comm_address")
        init_method = None
        if address["addr"] in ("127.0.0.1", "localhost", "::1"):
            # A runtime on loopback is one machine: meet through a file, so nothing listens beyond it.
            import tempfile
            import uuid

            path = Path(tempfile.gettempdir()) / f"rlightning-rendezvous-{uuid.uuid4().hex}"
            init_method = f"file://{path}"
            self._rendezvous_file = path
        futures = [
            m.submit(
                "init_comm",
                rank,
                len(members),
                address["addr"],
                address["port"],
                train_ranks,
                bcast_ranks,
                ddp_backend,
                bcast_backend or "gloo",
                init_method=init_method,
            )
            for rank, m in enumerate(members)
        ]
        resolve(futures)
        self._comm = {
            "world_size": len(members),
            "master": init_method or f"{address['addr']}:{address['port']}",
            "ddp_size": len(trains) if ddp else 1,
            "ddp_backend": ddp_backend if ddp else None,
            "ddp_fallback_reason": ddp_reason if ddp else "",
            "bcast_backend": bcast_backend,
            "bcast_fallback_reason": bcast_reason,
        }
        logger.info("policy comm group: %s", self._comm)
        return dict(self._comm)

    def construct_network(self, env_meta: EnvMeta, seed: Optional[int] = None) -> Dict[str, Any]:
        """Build the networks on every worker, allocate weight buffers, and sync eval to train rank 0.

        Called by the engine once the env group has reported its `EnvMeta`.

        Args:
            env_meta: Spaces of one sub-environment.
            seed: Seeds torch on each worker (offset by role and index); None leaves RNGs alone.

        Raises:
            TypeError: ``env_meta`` is not an `EnvMeta`.
        """
        if not isinstance(env_meta, EnvMeta):
            raise TypeError(f"construct_network(env_meta) needs an EnvMeta, got {type(env_meta).__name__}")
        if self._sync_plan is None:
            self.init_weight_buffer()
        self.recovery.record_setup(env_meta, seed)
        futures = [w.submit("setup", env_meta, seed) for w in self.train_workers + self.eval_workers]
        results = resolve(futures)
        n = len(self.train_workers)
        setup = {"train": results[:n], "eval": results[n:]}
        effective = self._sync_plan["effective"]
        if effective == "collective" and any(r["weight_signature"] is None for r in results[:1] + setup["eval"]):
            logger.warning(
                "weight_sync='collective' without a broadcast group (init_comm_group not run); using object_store"
            )
            effective = self._sync_plan["effective"] = "object_store"
        self._sync = make_weight_sync(effective, self.train_workers, self.eval_workers)
        self._sync.prepare(setup)
        if self.train_workers:
            self.weight_version = int(setup["train"][0]["weight_version"])
            self._sync.push(self.weight_version)
        self._network = {
            "num_parameters": results[0]["num_parameters"],
            "devices": {"train": [r["device"] for r in setup["train"]], "eval": [r["device"] for r in setup["eval"]]},
        }
        return {**self._network, "weight_sync": effective}

    # ------------------------------------------------------------------ dead eval workers

    def set_eval_relauncher(self, relaunch: Optional[Callable[[int], Any]]) -> None:
        """How to start a fresh eval worker actor ``i`` (the builder sets it for remote eval workers)."""
        self.recovery.set_relauncher(relaunch)

    def dead_workers(self, role: str = "eval", timeout: float = 60.0) -> List[int]:
        """Indices of the dead Ray actors of ``role`` (``train`` or ``eval``); a busy one counts as alive."""
        return self.recovery.dead_workers(role, timeout)

    def restart_dead_eval_workers(self, cause: Optional[BaseException] = None) -> List[int]:
        """Relaunch every dead eval worker with the current weights; returns the indices restarted.

        Raises:
            WorkerLostError: past ``policy.max_restarts``, no relauncher, or no weights left to copy.
        """
        return self.recovery.restart_dead(cause)

    def replace_eval_worker(self, index: int, worker: WorkerHandle, placement: Dict[str, Any]) -> None:
        """Put a relaunched eval worker (already built and holding the current weights) in slot ``index``.

        A collective weight sync falls back to the object store: the new actor is not in the broadcast group.
        """
        self.eval_workers[index] = worker
        self._placement["eval"][index] = placement
        self._router.replace_worker(index, worker)
        if self._sync is not None and self._sync.name == "collective":
            logger.warning("weight sync switches from collective to object_store: eval worker %d was restarted", index)
            self._sync = make_weight_sync("object_store", self.train_workers, self.eval_workers)
            reason = f"eval worker {index} restarted"
            self._sync_plan = dict(self._sync_plan or {}, effective="object_store", reason=reason)

    # ------------------------------------------------------------------ acting

    def rollout_batch(self, batch: BatchedData) -> BatchedData:
        """Compute responses for a batch of `EnvRet` (values or ObjectRefs), resolved with one ``ray.get``.

        With one rollout worker, one call; with several, the batch is split over
        them (sync: evenly over idle workers; async: the least loaded). Each worker
        runs one forward pass over all the observations it receives.

        Returns:
            `BatchedData` of `PolicyResponse`, same ids and order.
        """
        while True:
            calls = self._submit_rollout(batch, per_item=False)
            futures = [future for _, _, future in calls]
            try:
                results = resolve(futures)
            except Exception as err:  # noqa: BLE001 - re-raised unless a dead eval worker was replaced
                self._router.forget(futures)
                if not (is_actor_death(err) and self.recovery.restart_dead(err)):
                    raise
                continue  # the whole batch again: inference has no side effects
            break
        self._router.forget(futures)
        values: List[Any] = [None] * len(batch)
        for (start, end, _), chunk in zip(calls, results):
            values[start:end] = chunk
        return BatchedData(list(batch.ids()), values)

    def rollout_batch_async(self, batch: BatchedData) -> BatchedData:
        """Like `rollout_batch`, but returns at once: one ObjectRef per item (or a response, local workers)."""
        return BatchedData(list(batch.ids()), self._submit_rollout(batch, per_item=True))

    def _submit_rollout(self, batch: BatchedData, per_item: bool) -> List[Any]:
        if not isinstance(batch, BatchedData):
            raise TypeError(f"rollout_batch needs a BatchedData of EnvRet, got {type(batch).__name__}")
        items = list(batch.values())
        self._counters["rollout_calls"] += 1
        self._counters["rollout_items"] += len(items)
        return self._router.submit(items, per_item=per_item)

    def set_deterministic(self, deterministic: bool = True) -> None:
        """Make the rollout workers act deterministically (the eval engine uses it)."""
        self.recovery.record_deterministic(deterministic)
        resolve([w.submit("set_deterministic", bool(deterministic)) for w in self.rollout_workers])

    # ------------------------------------------------------------------ learning

    def _need_train(self, what: str) -> None:
        if not self.train_workers:
            raise RuntimeError(f"{what} needs train workers; this group has eval workers only")

    def update_dataset(self, data: Sequence[Any]) -> None:
        """Hand each train worker its data (TensorDicts or ObjectRefs), one entry per worker.

        Raises:
            TypeError: ``data`` is not a list or tuple.
            ValueError: not one entry per train worker.
        """
        self._need_train("update_dataset")
        if not isinstance(data, (list, tuple)):
            raise TypeError(f"update_dataset needs a list with one entry per train worker, got {type(data).__name__}")
        if len(data) != len(self.train_workers):
            raise ValueError(
                f"update_dataset got {len(data)} entries for {len(self.train_workers)} train workers; "
                "DataBuffer.sample returns one per train worker"
            )
        futures = []
        for w, d in zip(self.train_workers, data):
            if not w.is_remote and is_object_ref(d):
                d = resolve_one(d)
            futures.append(w.submit("update_dataset", d))
        resolve(futures)

    def train(self) -> Dict[str, float]:
        """Run ``train()`` on every train worker (data-parallel); returns the metrics averaged over workers."""
        return self._train_call(None)

    def train_minibatches(self, num_minibatches: int) -> Dict[str, float]:
        """``train_minibatches(k)`` on every train worker: ``k`` steps on consecutive rows of each one's dataset."""
        return self._train_call(int(num_minibatches))

    def _train_call(self, num_minibatches: Optional[int]) -> Dict[str, float]:
        # BasePolicy.learn: train() or train_minibatches(k) in the update's arithmetic (optim.matmul_precision)
        self._need_train("train" if num_minibatches is None else "train_minibatches")
        per_worker = resolve([w.submit("learn", num_minibatches) for w in self.train_workers])
        metrics: Dict[str, float] = {}
        for key in per_worker[0]:
            values = [float(m[key]) for m in per_worker if key in m]
            metrics[key] = sum(values) / len(values)
        self._counters["train_calls"] += 1
        self._last_metrics = metrics
        return metrics

    def set_env_steps(self, env_steps: int) -> None:
        """Tell the train workers the run's env steps so far (exploration, target and beta schedules)."""
        self._need_train("set_env_steps")
        resolve([w.submit("set_env_steps", int(env_steps)) for w in self.train_workers])

    def priority_updates(self) -> List[Optional[Dict[str, Any]]]:
        """Each train worker's new replay priorities from its last ``train()`` (see `BasePolicy.priority_update`)."""
        self._need_train("priority_updates")
        return resolve([w.submit("priority_update") for w in self.train_workers])

    def set_schedule(self, total_iterations: int, total_env_steps: Optional[int] = None) -> None:
        """Tell the train workers how long the run is (learning-rate annealing; see `BasePolicy.set_schedule`)."""
        resolve([w.submit("set_schedule", total_iterations, total_env_steps) for w in self.train_workers])

    # ------------------------------------------------------------------ weights

    def _need_network(self, what: str) -> None:
        if self._sync is None:
            raise RuntimeError(f"{what} called before construct_network(env_meta)")

    def sync_weights(self) -> int:
        """Send train rank 0's weights to every eval worker; returns the new weight version."""
        self._need_train("sync_weights")
        self._need_network("sync_weights")
        version = self.weight_version + 1
        start = time.perf_counter()
        self._sync.push(version)
        self.weight_version = version
        self._last_sync_s = time.perf_counter() - start
        self._last_sync_time = time.time()
        self._counters["sync_count"] += 1
        return version

    def verify_eval_weight_consistency(self, raise_on_mismatch: bool = True) -> Dict[str, Any]:
        """Compare weight checksums and versions of every worker with train rank 0.

        Returns:
            ``consistent``, ``train_checksums``, ``eval_checksums``, ``versions`` and ``mismatched``
            (worker labels whose weights differ from train rank 0).

        Raises:
            RuntimeError: a worker differs and ``raise_on_mismatch`` is True.
        """
        self._need_network("verify_eval_weight_consistency")
        workers = self.train_workers + self.eval_workers
        sums = resolve([w.submit("weights_checksum") for w in workers])
        versions = resolve([w.submit("stats") for w in workers])
        n = len(self.train_workers)
        labels = [f"train[{i}]" for i in range(n)] + [f"eval[{i}]" for i in range(len(self.eval_workers))]
        ref = sums[0]
        mismatched = [lab for lab, s in zip(labels, sums) if s != ref]
        report = {
            "consistent": not mismatched,
            "train_checksums": sums[:n],
            "eval_checksums": sums[n:],
            "versions": {lab: v["weight_version"] for lab, v in zip(labels, versions)},
            "mismatched": mismatched,
        }
        if mismatched and raise_on_mismatch:
            raise RuntimeError(
                f"policy weights differ from {labels[0]} on {mismatched} "
                f"(versions {report['versions']}); call sync_weights() or check the weight sync strategy"
            )
        return report

    def get_weights(self) -> Dict[str, Any]:
        """Train rank 0's (or eval worker 0's) weights as numpy arrays."""
        return (self.train_workers or self.eval_workers)[0].call("get_weights")

    def weights_ref(self) -> Any:
        """`get_weights` without a copy through this process: an ObjectRef when that worker is a Ray actor.

        The actor puts its weights in the object store itself; whoever loads them (env workers'
        policy copies) reads them from there. A local worker's weights are returned as they are.
        """
        worker = (self.train_workers or self.eval_workers)[0]
        return worker.submit("get_weights") if worker.is_remote else worker.call("get_weights")

    # ------------------------------------------------------------------ checkpoints

    def save_checkpoint(self, path: Union[str, Path]) -> str:
        """Write train rank 0's checkpoint to ``path`` on this machine; returns the path."""
        import torch

        self._need_network("save_checkpoint")
        state = (self.train_workers or self.eval_workers)[0].call("checkpoint_state")
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        torch.save(state, p)
        return str(p)

    def load_checkpoint(self, path: Union[str, Path]) -> int:
        """Load a checkpoint into every train worker and resync the eval workers; returns its weight version.

        Raises:
            FileNotFoundError: no file at ``path``.
        """
        import torch

        self._need_network("load_checkpoint")
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"policy checkpoint {str(p)!r} does not exist")
        state = torch.load(p, map_location="cpu", weights_only=True)
        targets = self.train_workers or self.eval_workers
        shipped = state
        if any(w.is_remote for w in targets):
            import ray

            shipped = ray.put(state)  # once, for every remote worker
        results = resolve([w.submit("load_checkpoint_state", shipped if w.is_remote else state) for w in targets])
        self.weight_version = int(results[0]["weight_version"])
        if self.train_workers:
            self._sync.push(self.weight_version)
        return self.weight_version

    # ------------------------------------------------------------------ snapshots and lifetime

    def stats(self) -> Dict[str, Any]:
        """A plain snapshot: workers, weight version, last sync, last train metrics, rollout routing."""
        return {
            "num_train_workers": len(self.train_workers),
            "num_eval_workers": len(self.eval_workers),
            "train_workers": [
                dict(p, remote=w.is_remote) for w, p in zip(self.train_workers, self._placement["train"])
            ],
            "eval_workers": [dict(p, remote=w.is_remote) for w, p in zip(self.eval_workers, self._placement["eval"])],
            "weight_version": self.weight_version,
            "weight_sync": dict(self._sync_plan or {}),
            "comm": dict(self._comm),
            "network": dict(self._network),
            "last_sync_s": self._last_sync_s,
            "last_sync_time": self._last_sync_time,
            "last_train_metrics": dict(self._last_metrics),
            "eval_restarts": list(self.recovery.restarts),
            "total_eval_restarts": int(sum(self.recovery.restarts)),
            "rollout_mode": self._router.mode,
            "rollout_workers": self._router.stats(),
            **self._counters,
        }

    def shutdown(self) -> None:
        """Stop the Ray actors of this group (local workers are left to the garbage collector)."""
        if self._closed:
            return
        for w in self.train_workers + self.eval_workers:
            w.kill()
        if self._rendezvous_file is not None:
            self._rendezvous_file.unlink(missing_ok=True)
        if self.train_placement is not None:
            self.train_placement.remove()
        self._closed = True

    def close(self) -> None:
        """Same as `shutdown` (the name the other groups use)."""
        self.shutdown()

    def __repr__(self) -> str:
        return (
            f"PolicyGroup(train={len(self.train_workers)}, eval={len(self.eval_workers)}, "
            f"weight_version={self.weight_version}, sync={(self._sync_plan or {}).get('effective')})"
        )
