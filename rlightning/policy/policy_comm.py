"""`PolicyCommMixin`: a policy worker's side of process groups, gradient all-reduce and weight broadcast.

Part of `BasePolicy`. The group (`PolicyGroup.init_comm_group`) tells each
worker its rank and the groups to join; the worker then averages gradients
with the other train workers (``apply_gradients``) and takes part in weight
broadcasts (``broadcast_weights`` / ``receive_weights``).
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Sequence

import torch

from rlightning.policy.comm import (
    CommState,
    FlatWeights,
    allreduce_mean_,
    allreduce_sum_,
    broadcast_tensors_,
    comm_device,
    destroy_world,
    init_world,
)
from rlightning.policy.resources import describe_process


class PolicyCommMixin:
    """Process-group membership of a policy worker (mixed into `BasePolicy`)."""

    _comm: CommState
    _flat: Optional[FlatWeights]
    device: torch.device

    def _init_comm_state(self) -> None:
        self._comm = CommState()
        self._flat = None

    # ------------------------------------------------------------------ placement

    def get_placement_info(self) -> Dict[str, Any]:
        """Node ip, node id, GPU ids, pid, device and CUDA availability of this worker."""
        from rlightning.utils.ray.remote_class import node_ip

        proc = describe_process()
        node_id = None
        if proc["in_ray_actor"]:
            import ray

            node_id = ray.get_runtime_context().get_node_id()
        return {
            "node_ip": node_ip(),
            "node_id": node_id,
            "gpu_ids": proc["ray_gpu_ids"] if proc["in_ray_actor"] else ([0] if self.device.type == "cuda" else []),
            "pid": os.getpid(),
            "device": str(self.device),
            "cuda_available": proc["cuda_available"],
            "role": str(getattr(self, "role_type", "")),
            "worker_index": getattr(self, "worker_index", 0),
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
        self._comm = init_world(
            rank,
            world_size,
            master_addr,
            master_port,
            train_ranks,
            bcast_ranks,
            ddp_backend,
            bcast_backend,
            self.device,
            timeout_s,
            init_method,
        )
        self._dist_rank, self._dist_world_size = rank, world_size  # what DistributedMixin reports
        return self.comm_info()

    def comm_info(self) -> Dict[str, Any]:
        """Rank, world size and the groups this worker belongs to."""
        c = self._comm
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
        if self._comm.rank >= 0:
            destroy_world()
        self._init_comm_state()

    def broadcast_from_rank0(self) -> None:
        """Make every data-parallel rank hold rank 0's module states (no-op outside a group)."""
        if not self._comm.data_parallel:
            return
        tensors = [t for m in self._modules.values() for t in m.state_dict(keep_vars=True).values()]
        broadcast_tensors_(tensors, self._comm, self.device, group="ddp")

    # ------------------------------------------------------------------ weight broadcast

    def alloc_weight_buffer(self) -> Optional[str]:
        """Allocate the flat broadcast buffer once the networks exist; returns its layout signature.

        Returns None when this worker is in no broadcast group.
        """
        if self._comm.bcast_group is None:
            self._flat = None
            return None
        self._flat = FlatWeights(self.sync_named_tensors(), comm_device(self._comm.bcast_backend, self.device))
        return self._flat.signature()

    def _broadcast_flat(self, send: bool, weight_version: int) -> int:
        import torch.distributed as dist

        if self._flat is None or self._comm.bcast_group is None:
            raise RuntimeError(
                "this worker has no weight broadcast buffer: the group's weight_sync is not 'collective' "
                "or construct_network has not run"
            )
        named = self.sync_named_tensors()
        if send:
            self._flat.pack(named)
        for buf in self._flat.ordered_buffers():
            dist.broadcast(buf, src=0, group=self._comm.bcast_group)
        with self._weights_lock:  # receive into the flat buffer first, then swap in under the lock
            if not send:
                self._flat.unpack(named)
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)
            self.weight_version = int(weight_version)
        return self.weight_version

    def broadcast_weights(self, weight_version: int) -> int:
        """Send this worker's weights to the broadcast group (train rank 0)."""
        return self._broadcast_flat(True, weight_version)

    def receive_weights(self, weight_version: int) -> int:
        """Receive weights from train rank 0 over the broadcast group (eval workers)."""
        return self._broadcast_flat(False, weight_version)

    # ------------------------------------------------------------------ gradients

    def allreduce_gradients(self, parameters: Iterable[torch.nn.Parameter]) -> None:
        """Average the gradients of ``parameters`` over the data-parallel ranks (no-op alone)."""
        if not self._comm.data_parallel:
            return
        grads: List[torch.Tensor] = []
        for p in parameters:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
            grads.append(p.grad)
        allreduce_mean_(grads, self._comm, self.device)

    def apply_gradients(
        self,
        loss: torch.Tensor,
        optimizer: torch.optim.Optimizer,
        parameters: Optional[Iterable[torch.nn.Parameter]] = None,
        max_grad_norm: Optional[float] = None,
    ) -> float:
        """Backward, average gradients over ranks, clip, step. Returns the gradient norm before clipping."""
        params = (
            list(parameters) if parameters is not None else [p for g in optimizer.param_groups for p in g["params"]]
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.allreduce_gradients(params)
        grads = [p for p in params if p.grad is not None]
        if not grads:
            return 0.0
        if max_grad_norm is not None:
            norm = torch.nn.utils.clip_grad_norm_(grads, max_grad_norm)
        else:
            norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(p.grad) for p in grads]))
        optimizer.step()
        return float(norm)

    def allreduce_mean(self, value: float) -> float:
        """Mean of a float over the data-parallel ranks (the value itself alone)."""
        if not self._comm.data_parallel:
            return float(value)
        t = torch.tensor([float(value)], dtype=torch.float64)
        return float(allreduce_sum_(t, self._comm, self.device).item() / self._comm.ddp_size)

    def allreduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum of a tensor over the data-parallel ranks (the tensor itself alone)."""
        return allreduce_sum_(tensor, self._comm, self.device)
