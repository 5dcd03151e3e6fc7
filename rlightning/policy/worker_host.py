"""`PolicyWorkerHost`: the worker side of a policy, held by every `BasePolicy` as ``policy.host``.

It owns what is not the algorithm: the process groups (the group, `PolicyGroup.init_comm_group`,
tells each worker its rank and the groups to join), gradient all-reduce over data-parallel ranks,
the weight transport (named tensors, export and in-place load, checksums, the flat broadcast
buffer), and checkpoint I/O (`rlightning.policy.checkpoint`). It reads the policy only through its
public surface: ``modules``, ``optimizers``, ``device``, ``sync_module_names``, the counters, and
the checkpoint hooks. `BasePolicy` keeps the public method names (what Ray calls on a worker actor
and what algorithms call) as one-line delegates to this object.
"""

from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, ContextManager, Dict, Iterable, List, Optional, Sequence, Union

import numpy as np
import torch

from rlightning.policy import checkpoint as ckpt
from rlightning.policy.comm import (
    CommState,
    FlatWeights,
    allreduce_mean_,
    allreduce_sum_,
    broadcast_tensors_,
    comm_device,
    destroy_world,
    init_world,
    tensors_checksum,
)
from rlightning.policy.numerics import update_numerics
from rlightning.policy.resources import describe_process

if TYPE_CHECKING:
    from rlightning.policy.base_policy import BasePolicy


class PolicyWorkerHost:
    """Process groups, weight transport and checkpoint I/O of one policy worker.

    Args:
        policy: The policy this host serves.
    """

    def __init__(self, policy: BasePolicy) -> None:
        self.policy = policy
        self.comm = CommState()
        """This worker's place in the policy world (rank, groups, backends)."""
        self.weights_lock = threading.RLock()
        """Held while acting and while weights are replaced: an actor with max_concurrency > 1 runs rollouts
        and syncs in different threads, and a response's weight_version must match its weights."""
        self._flat: Optional[FlatWeights] = None
        self._grads_reduced = False  # set by allreduce_gradients, cleared by the next optimizer step
        # copy_weights_from's (source policy, both sides' live tensors, (dst, src) pairs) of the last copy
        self._copy_plan: Optional[tuple] = None

    # ------------------------------------------------------------------ placement

    def get_placement_info(self) -> Dict[str, Any]:
        """Node ip, node id, GPU ids, pid, device and CUDA availability of this worker."""
        from rlightning.utils.ray.remote_class import node_ip

        proc = describe_process()
        device = self.policy.device
        node_id = None
        if proc["in_ray_actor"]:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        return {
            "node_ip": node_ip(),
            "node_id": node_id,
            "gpu_ids": proc["ray_gpu_ids"] if proc["in_ray_actor"] else ([0] if device.type == "cuda" else []),
            "pid": os.getpid(),
            "device": str(device),
            "cuda_available": proc["cuda_available"],
            "role": str(self.policy.role_type),
            "worker_index": self.policy.worker_index,
        }

    def comm_address(self) -> Dict[str, Any]:
        """This worker's node ip and a free port on it (rank 0 hosts the rendezvous)."""
        from rlightning.utils.ray.remote_class import find_free_port, node_ip

        return {"addr": node_ip(), "port": find_free_port()}

    # ------------------------------------------------------------------ groups

    def init_comm(
        self,
        rank: int,
        world_size: int,
        master_addr: str,
        master_port: int,
        train_ranks: Sequence[int],
        bcast_ranks: Sequence[int],
        ddp_backend: str = "gloo",
        bcast_backend: str = "gloo",
        timeout_s: float = 120.0,
        init_method: Optional[str] = None,
    ) -> Dict[str, Any]:
        """Join the policy world as ``rank`` and its data-parallel and broadcast subgroups.

        Every member of the world must call this concurrently. Returns `comm_info`.
        """
        self.comm = init_world(
            rank,
            world_size,
            master_addr,
            master_port,
            train_ranks,
            bcast_ranks,
            ddp_backend,
            bcast_backend,
            self.policy.device,
            timeout_s,
            init_method,
        )
        return self.comm_info()

    def comm_info(self) -> Dict[str, Any]:
        """Rank, world size and the groups this worker belongs to."""
        c = self.comm
        return {
            "rank": c.rank,
            "world_size": c.world_size,
            "data_parallel": c.data_parallel,
            "ddp_size": c.ddp_size if c.ddp_group is not None else 1,
            "ddp_backend": c.ddp_backend,
            "bcast_backend": c.bcast_backend,
            "in_bcast_group": c.bcast_group is not None,
        }

    def destroy_comm(self) -> None:
        """Leave the policy world."""
        if self.comm.rank >= 0:
            destroy_world()
        self.comm = CommState()
        self._flat = None

    def broadcast_from_rank0(self) -> None:
        """Make every data-parallel rank hold rank 0's module states (no-op outside a group)."""
        if not self.comm.data_parallel:
            return
        tensors = [t for m in self.policy.modules.values() for t in m.state_dict(keep_vars=True).values()]
        broadcast_tensors_(tensors, self.comm, self.policy.device, group="ddp")

    # ------------------------------------------------------------------ weight broadcast

    def alloc_weight_buffer(self) -> Optional[str]:
        """Allocate the flat broadcast buffer once the networks exist; returns its layout signature.

        Returns None when this worker is in no broadcast group.
        """
        if self.comm.bcast_group is None:
            self._flat = None
            return None
        self._flat = FlatWeights(
            self.policy.sync_named_tensors(), comm_device(self.comm.bcast_backend, self.policy.device)
        )
        return self._flat.signature()

    def _broadcast_flat(self, send: bool, weight_version: int) -> int:
        import torch.distributed as dist

        if self._flat is None or self.comm.bcast_group is None:
            raise RuntimeError(
                "this worker has no weight broadcast buffer: the group's weight_sync is not 'collective' "
                "or construct_network has not run"
            )
        named = self.policy.sync_named_tensors()
        if send:
            self._flat.pack(named)
        for buf in self._flat.ordered_buffers():
            dist.broadcast(buf, src=0, group=self.comm.bcast_group)
        with self.weights_lock:  # receive into the flat buffer first, then swap in under the lock
            if not send:
                self._flat.unpack(named)
            if self.policy.device.type == "cuda":
                torch.cuda.synchronize(self.policy.device)
            self.policy.weight_version = int(weight_version)
        return self.policy.weight_version

    def broadcast_weights(self, weight_version: int) -> int:
        """Send this worker's weights to the broadcast group (train rank 0)."""
        return self._broadcast_flat(True, weight_version)

    def receive_weights(self, weight_version: int) -> int:
        """Receive weights from train rank 0 over the broadcast group (eval workers)."""
        return self._broadcast_flat(False, weight_version)

    # ------------------------------------------------------------------ gradients

    def allreduce_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Average the gradients of ``parameters`` over the data-parallel ranks (no-op alone)."""
        if not self.comm.data_parallel:
            return
        self._grads_reduced = True
        grads: List[torch.Tensor] = []
        for p in parameters:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        allreduce_mean_(grads, self.comm, self.policy.device)

    def watch_optimizer(self, optimizer: torch.optim.Optimizer) -> None:
        """Make every ``optimizer.step()`` of a data-parallel rank step on averaged gradients.

        `apply_gradients` averages them before clipping; a ``train()`` that calls ``loss.backward()`` and
        ``optimizer.step()`` itself gets its gradients averaged here, in a step pre-hook, instead of silently
        diverging from the other ranks. Gradients already averaged since the last step are not averaged again.
        """

        def average_before_step(opt: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
            if self.comm.data_parallel and not self._grads_reduced:
                self.allreduce_gradients([p for group in opt.param_groups for p in group["params"]])
            self._grads_reduced = False

        optimizer.register_step_pre_hook(average_before_step)

    def apply_gradients(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Optional[Iterable[torch.nn.Parameter]] = None,
        max_grad_norm: Optional[float] = None,
        return_norm: bool = True,
    ) -> Optional[float]:
        """Backward, average gradients over ranks, clip, step. Returns the gradient norm before clipping
        (``return_norm=False``: None, and the norm is computed only when clipping needs it).

        Runs in `update_numerics` (``optim.flush_denormals``, on by default, and ``optim.matmul_precision``).
        """
        with self.update_numerics():
            return self._apply_gradients(loss, optimizer, parameters, max_grad_norm, return_norm)

    def update_numerics(self) -> ContextManager[None]:
        """The policy's ``optim.flush_denormals`` and ``optim.matmul_precision`` until the block ends
        (`rlightning.policy.numerics.update_numerics`; an inner scope of the same thread changes nothing)."""
        return update_numerics(getattr(self.policy.config, "optim", None), self.policy.device)

    def _apply_gradients(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Optional[Iterable[torch.nn.Parameter]],
        max_grad_norm: Optional[float],
        return_norm: bool,
    ) -> Optional[float]:
        params = (
            list(parameters) if parameters is not None else [p for g in optimizer.param_groups for p in g["params"]]
        )
        if type(optimizer).zero_grad is torch.optim.Optimizer.zero_grad:
            for group in optimizer.param_groups:  # zero_grad(set_to_none=True) without its profiler record
                for p in group["params"]:
                    p.grad = None
        else:
            optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.allreduce_gradients(params)
        grads = [p for p in params if p.grad is not None]
        if not grads:
            return 0.0 if return_norm else None
        norm = None
        if max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(grads, max_grad_norm)
        elif return_norm:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in grads]))
        optimizer.step()
        return float(norm) if return_norm else None

    def allreduce_mean(self, value: float) -> float:
        """Mean of a float over the data-parallel ranks (the value itself alone)."""
        if not self.comm.data_parallel:
            return float(value)
        t = torch.tensor([float(value)], dtype=torch.float64)
        return float(allreduce_sum_(t, self.comm, self.policy.device).item() / self.comm.ddp_size)

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of a tensor over the data-parallel ranks (the tensor itself alone)."""
        return allreduce_sum_(tensor, self.comm, self.policy.device)

    # ------------------------------------------------------------------ weight transport

    def sync_named_tensors(self) -> Dict[str, torch.Tensor]:
        """Name -> live tensor (parameters and buffers) of the modules eval workers need."""
        modules = self.policy.modules
        names = self.policy.sync_module_names
        named: Dict[str, torch.Tensor] = {}
        for mname in names if names is not None else list(modules):
            if mname not in modules:
                continue
            for key, tensor in modules[mname].state_dict(keep_vars=True).items():
                named[f"{mname}.{key}"] = tensor
        return named

    def state_dict(self) -> Dict[str, torch.Tensor]:
        """The weights eval workers need, as detached tensors (no copy)."""
        return {k: v.detach() for k, v in self.policy.sync_named_tensors().items()}

    def get_weights(self) -> Dict[str, np.ndarray]:
        """The weights eval workers need, as numpy copies on the host."""
        return {k: v.detach().cpu().numpy().copy() for k, v in self.policy.sync_named_tensors().items()}

    def load_state_dict(self, state_dict: Dict[str, Any], weight_version: Optional[int] = None) -> int:
        """Copy weights (numpy arrays or tensors) into the live modules, in place; see `BasePolicy.load_state_dict`."""
        name = type(self.policy).__name__
        if not isinstance(state_dict, dict):
            raise TypeError(f"load_state_dict needs a dict of name -> array, got {type(state_dict).__name__}")
        named = self.policy.sync_named_tensors()
        if not named:
            raise RuntimeError(f"{name}.load_state_dict called before construct_network(env_meta)")
        missing = sorted(set(named) - set(state_dict))
        unexpected = sorted(set(state_dict) - set(named))
        if missing or unexpected:
            raise KeyError(f"load_state_dict: missing keys {missing[:8]}, unexpected keys {unexpected[:8]}")
        for key, tensor in named.items():
            shape = tuple(np.shape(state_dict[key]))
            if shape != tuple(tensor.shape):
                raise ValueError(f"load_state_dict: {key!r} has shape {shape}, the network has {tuple(tensor.shape)}")
        with self.weights_lock, torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # read-only numpy from the object store
            for key, tensor in named.items():
                value = state_dict[key]
                src = torch.from_numpy(np.asarray(value)) if not isinstance(value, torch.Tensor) else value
                tensor.copy_(src)
            if weight_version is not None:
                self.policy.weight_version = int(weight_version)
        return self.policy.weight_version

    def copy_weights_from(self, other: BasePolicy, weight_version: Optional[int] = None) -> int:
        """Copy ``other``'s weights into this worker's, in place (workers in one process; see `load_state_dict`).

        The first copy goes through `load_state_dict` (every key and shape checked) and keeps the pairs of
        tensors it matched; later copies from the same policy reuse them while both sides still hold the very
        same tensor objects (a cheap walk over the modules: a module registered again, moved to another device
        or replaced in place makes the next copy a checked one again).
        """
        src_live, dst_live = _live_tensors(other), _live_tensors(self.policy)
        plan = self._copy_plan
        if (
            plan is not None
            and src_live is not None
            and dst_live is not None
            and plan[0] is other
            and _same_objects(plan[1], src_live)
            and _same_objects(plan[2], dst_live)
        ):
            with self.weights_lock, torch.no_grad():
                for dst, src in plan[3]:
                    dst.copy_(src)
                if weight_version is not None:
                    self.policy.weight_version = int(weight_version)
            return self.policy.weight_version
        self._copy_plan = None
        version = self.load_state_dict(other.state_dict(), weight_version)
        if src_live is not None and dst_live is not None:
            src, dst = other.sync_named_tensors(), self.policy.sync_named_tensors()
            pairs = [(dst[k], src[k]) for k in dst]  # the live objects: they follow a .data swap
            self._copy_plan = (other, src_live, dst_live, pairs)
        return version

    def weights_checksum(self) -> str:
        """SHA-1 of the exact bytes of the weights eval workers need."""
        return tensors_checksum(self.policy.sync_named_tensors())

    # ------------------------------------------------------------------ checkpoint I/O

    def checkpoint_state(self) -> Dict[str, Any]:
        """Everything needed to resume (see `rlightning.policy.checkpoint.checkpoint_state`)."""
        return ckpt.checkpoint_state(self.policy)

    def load_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, int]:
        """Restore a `checkpoint_state` dict; returns the restored counters."""
        return ckpt.load_checkpoint_state(self.policy, state)

    def save_checkpoint(self, path: Union[str, os.PathLike]) -> str:
        """Write `checkpoint_state` to ``path`` (parent folders are created); returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self.checkpoint_state(), p)
        return str(p)

    def load_checkpoint(self, path: Union[str, os.PathLike]) -> Dict[str, int]:
        """Read a checkpoint with ``torch.load(weights_only=True)`` and restore it.

        Raises:
            FileNotFoundError: no file at ``path``.
        """
        return self.load_checkpoint_state(ckpt.read_checkpoint(path))


def _live_tensors(policy: Any) -> Optional[List[torch.Tensor]]:
    """Every parameter and buffer object of ``policy``'s synced modules, in module order (None: a policy whose
    synced tensors are not its registered modules' own, e.g. one that overrides ``sync_named_tensors``)."""
    from rlightning.policy.base_policy import BasePolicy

    cls = type(policy)
    if not isinstance(policy, BasePolicy) or any(
        getattr(cls, name) is not getattr(BasePolicy, name) for name in ("sync_named_tensors", "state_dict")
    ):
        return None
    modules = policy.modules
    names = policy.sync_module_names
    out: List[torch.Tensor] = []
    for mname in names if names is not None else list(modules):
        module = modules.get(mname)
        if module is None:
            continue
        for sub in module.modules():
            out.extend(sub._parameters.values())
            out.extend(sub._buffers.values())
    return out


def _same_objects(a: Sequence[Any], b: Sequence[Any]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))
