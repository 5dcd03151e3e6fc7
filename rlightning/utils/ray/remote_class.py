"""`DistributedMixin`: rank, world size, placement facts and process-group setup for workers."""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Optional


def find_free_port() -> int:
    """Return a TCP port that is free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_ip() -> str:
    """The IP address of the node this process runs on (Ray's view when Ray is up)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except Exception:  # noqa: BLE001 - fall back to loopback
        pass
    return "127.0.0.1"


class DistributedMixin:
    """Mixed into a worker class to make it a member of a torch.distributed group.

    The mixin keeps no constructor of its own, so ``type(name, (Policy, DistributedMixin), {})``
    builds a class with the policy's constructor.
    """

    _dist_rank: int = 0
    _dist_world_size: int = 1
    _dist_group_ready: bool = False

    @property
    def rank(self) -> int:
        """Rank of this worker in its group."""
        return self._dist_rank

    @property
    def world_size(self) -> int:
        """Number of workers in the group."""
        return self._dist_world_size

    def get_node_ip(self) -> str:
        """IP address of this worker's node."""
        return node_ip()

    def get_node_id(self) -> Optional[str]:
        """Ray node id of this worker (None outside Ray)."""
        try:
            import ray

            if ray.is_initialized():
                return ray.get_runtime_context().get_node_id()
        except Exception:  # noqa: BLE001
            pass
        return None

    def get_gpu_ids(self) -> List[int]:
        """GPU ids Ray assigned to this worker (empty without GPUs)."""
        try:
            import ray

            if ray.is_initialized():
                return [int(g) for g in ray.get_gpu_ids()]
        except Exception:  # noqa: BLE001
            pass
        return []

    def get_free_port(self) -> int:
        """A free port on this worker's node, for a process group's rendezvous."""
        return find_free_port()

    def get_placement_info(self) -> Dict[str, Any]:
        """Node ip, node id, GPU ids and pid of this worker."""
        return {
            "node_ip": self.get_node_ip(),
            "node_id": self.get_node_id(),
            "gpu_ids": self.get_gpu_ids(),
            "pid": os.getpid(),
        }

    def init_process_group(
        self,
        rank: int,
        world_size: int,
        master_addr: str,
        master_port: int,
        backend: str = "gloo",
        timeout_s: float = 120.0,
    ) -> bool:
        """Join the default torch.distributed process group.

        Raises:
            ValueError: a rank outside ``[0, world_size)``.
        """
        import datetime

        import torch.distributed as dist

        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} is outside [0, {world_size}) for this process group")
        self._dist_rank = rank
        self._dist_world_size = world_size
        if world_size == 1 and backend == "gloo":
            # A group of one still works for DDP; keep it cheap.
            pass
        if not dist.is_initialized():
            dist.init_process_group(
                backend=backend,
                init_method=f"tcp://{master_addr}:{master_port}",
                rank=rank,
                world_size=world_size,
                timeout=datetime.timedelta(seconds=timeout_s),
            )
        self._dist_group_ready = True
        return True

    def destroy_process_group(self) -> None:
        """Leave the process group, if joined."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()
        self._dist_group_ready = False
