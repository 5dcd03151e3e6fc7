"""torch.distributed plumbing for policy workers: the process groups and flat weight buffers.

One world holds every policy worker that takes part in a collective: train
workers get ranks ``0..T-1`` and, when weights are broadcast, eval workers get
``T..T+E-1``. Inside that world two subgroups are made: the data-parallel
group of the train workers (gradient all-reduce) and the broadcast group of
train rank 0 and the eval workers (weight sync). The default group always
uses gloo; a subgroup uses nccl only when every member has its own GPU.
"""

from __future__ import annotations

import datetime
import hashlib
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import torch

from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

BACKENDS = ("nccl", "gloo", "auto")


@dataclass
class CommState:
    """A worker's membership of the policy process groups.

    Attributes:
        rank: Rank in the policy world (-1 when not joined).
        world_size: Size of the policy world (0 when not joined).
        ddp_group: The data-parallel group of train workers (None when not a member).
        ddp_backend: Backend of ``ddp_group``.
        bcast_group: The weight broadcast group (None when not a member).
        bcast_backend: Backend of ``bcast_group``.
        ddp_size: Number of train workers in the data-parallel group.
    """

    rank: int = -1
    world_size: int = 0
    ddp_group: Optional[object] = None
    ddp_backend: Optional[str] = None
    ddp_size: int = 1
    bcast_group: Optional[object] = None
    bcast_backend: Optional[str] = None
    extras: Dict[str, object] = field(default_factory=dict)

    @property
    def data_parallel(self) -> bool:
        """True when gradients must be averaged with other train workers."""
        return self.ddp_group is not None and self.ddp_size > 1


def choose_backend(requested: str, members: Sequence[Dict], what: str) -> Tuple[str, str]:
    """Decide the backend of a group from its members' placement.

    Args:
        requested: ``nccl``, ``gloo`` or ``auto``.
        members: Placement dicts (``node_id``, ``gpu_ids``, ``cuda_available``) of the members.
        what: Name of the group, for the log line.

    Returns:
        (backend, reason): the backend to use and why (empty when as requested).

    Raises:
        ValueError: an unknown backend name.
    """
    if requested not in BACKENDS:
        raise ValueError(f"backend={requested!r} is not a torch.distributed backend here; use one of {BACKENDS}")
    if requested == "gloo":
        return "gloo", ""
    reason = ""
    if not all(m.get("gpu_ids") and m.get("cuda_available") for m in members):
        reason = "not every member has a GPU with CUDA"
    else:
        seen = set()
        for m in members:
            for gpu in m["gpu_ids"]:
                key = (m.get("node_id"), gpu)
                if key in seen:
                    reason = f"two members share GPU {gpu} on one node and NCCL needs one GPU per rank"
                seen.add(key)
    if reason:
        if requested == "nccl":
            # Nobody has a GPU: the usual CPU run, worth an info line; a partial or shared GPU setup: a warning.
            level = logging.INFO if not any(m.get("gpu_ids") for m in members) else logging.WARNING
            logger.log(level, "%s group: nccl was asked for but %s; falling back to gloo", what, reason)
        return "gloo", reason
    return "nccl", ""


def init_world(
    rank: int,
    world_size: int,
    master_addr: str,
    master_port: int,
    train_ranks: Sequence[int],
    bcast_ranks: Sequence[int],
    ddp_backend: str,
    bcast_backend: str,
    device: torch.device,
    timeout_s: float = 120.0,
    init_method: Optional[str] = None,
) -> CommState:
    """Join the policy world and create its subgroups (every member calls this, concurrently).

    Args:
        init_method: How members meet; default ``tcp://master_addr:master_port`` (a store that
            listens on every interface, as multi-node groups need). A ``file://`` store on one
            machine opens no socket for the rendezvous, and gloo then binds loopback only.

    Raises:
        ValueError: a rank outside ``[0, world_size)``.
    """
    import torch.distributed as dist

    if not 0 <= rank < world_size:
        raise ValueError(f"rank {rank} is outside [0, {world_size}) for the policy process group")
    if "nccl" in (ddp_backend, bcast_backend) and device.type == "cuda":
        torch.cuda.set_device(device)
    if init_method and init_method.startswith("file://"):
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")  # this machine only: gloo pairs on loopback
    if not dist.is_initialized():
        dist.init_process_group(
            backend="gloo",
            init_method=init_method or f"tcp://{master_addr}:{master_port}",
            rank=rank,
            world_size=world_size,
            timeout=datetime.timedelta(seconds=timeout_s),
        )
    state = CommState(rank=rank, world_size=world_size)
    # new_group is collective over the world: every member creates every group, in the same order.
    if len(train_ranks) > 1:
        group = dist.new_group(ranks=list(train_ranks), backend=ddp_backend)
        if rank in train_ranks:
            state.ddp_group, state.ddp_backend, state.ddp_size = group, ddp_backend, len(train_ranks)
    if len(bcast_ranks) > 1:
        group = dist.new_group(ranks=list(bcast_ranks), backend=bcast_backend)
        if rank in bcast_ranks:
            state.bcast_group, state.bcast_backend = group, bcast_backend
    return state


def destroy_world() -> None:
    """Leave the policy world, if joined."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def comm_device(backend: Optional[str], device: torch.device) -> torch.device:
    """Device that tensors must be on for a collective with ``backend``."""
    return device if backend == "nccl" else torch.device("cpu")


def allreduce_mean_(tensors: List[torch.Tensor], state: CommState, device: torch.device) -> None:
    """Average ``tensors`` in place over the data-parallel group (no-op outside one)."""
    if not state.data_parallel or not tensors:
        return
    import torch.distributed as dist

    target = comm_device(state.ddp_backend, device)
    flat = torch.cat([t.reshape(-1).to(target, torch.float32) for t in tensors])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM, group=state.ddp_group)
    flat /= state.ddp_size
    offset = 0
    for t in tensors:
        n = t.numel()
        t.copy_(flat[offset : offset + n].view_as(t).to(t.device, t.dtype))
        offset += n


def allreduce_sum_(tensor: torch.Tensor, state: CommState, device: torch.device) -> torch.Tensor:
    """Sum ``tensor`` over the data-parallel group; returns the (possibly new) summed tensor."""
    if not state.data_parallel:
        return tensor
    import torch.distributed as dist

    target = comm_device(state.ddp_backend, device)
    work = tensor.to(target)
    dist.all_reduce(work, op=dist.ReduceOp.SUM, group=state.ddp_group)
    return work.to(tensor.device)


def broadcast_tensors_(tensors: List[torch.Tensor], state: CommState, device: torch.device, group: str) -> None:
    """Broadcast ``tensors`` in place from world rank 0 over the ``ddp`` or ``bcast`` group."""
    grp = state.ddp_group if group == "ddp" else state.bcast_group
    backend = state.ddp_backend if group == "ddp" else state.bcast_backend
    if grp is None or not tensors:
        return
    import torch.distributed as dist

    target = comm_device(backend, device)
    for t in tensors:
        work = t.detach().to(target)
        dist.broadcast(work, src=0, group=grp)
        if work is not t:
            with torch.no_grad():
                t.copy_(work.to(t.device))


class FlatWeights:
    """One contiguous buffer per dtype holding a set of named tensors, for fast broadcast.

    The layout (names, shapes, dtypes in sorted name order) is the same on
    every worker built from the same class and env, and is checked with
    `signature` before the first broadcast.

    Args:
        named: Name -> live tensor (parameters and buffers).
        device: Where the flat buffers live (the GPU for nccl, CPU for gloo).
    """

    def __init__(self, named: Dict[str, torch.Tensor], device: torch.device) -> None:
        self.names = sorted(named)
        self.device = device
        self.slots: List[Tuple[str, torch.dtype, int, int, Tuple[int, ...]]] = []
        sizes: Dict[torch.dtype, int] = {}
        for name in self.names:
            t = named[name]
            start = sizes.get(t.dtype, 0)
            self.slots.append((name, t.dtype, start, t.numel(), tuple(t.shape)))
            sizes[t.dtype] = start + t.numel()
        self.buffers = {dtype: torch.empty(n, dtype=dtype, device=device) for dtype, n in sizes.items()}

    @property
    def nbytes(self) -> int:
        """Total bytes of the flat buffers."""
        return sum(b.numel() * b.element_size() for b in self.buffers.values())

    def signature(self) -> str:
        """A digest of the layout; equal on workers whose weights can be exchanged."""
        text = ";".join(f"{n}:{str(d)}:{s}" for n, d, _, _, s in self.slots)
        return hashlib.sha1(text.encode()).hexdigest()

    def pack(self, named: Dict[str, torch.Tensor]) -> None:
        """Copy the live tensors into the flat buffers."""
        with torch.no_grad():
            for name, dtype, start, n, _ in self.slots:
                self.buffers[dtype][start : start + n].copy_(named[name].detach().reshape(-1))

    def unpack(self, named: Dict[str, torch.Tensor]) -> None:
        """Copy the flat buffers back into the live tensors."""
        with torch.no_grad():
            for name, dtype, start, n, shape in self.slots:
                named[name].copy_(self.buffers[dtype][start : start + n].view(shape))

    def ordered_buffers(self) -> Iterable[torch.Tensor]:
        """The flat buffers in a fixed order (by dtype name)."""
        return [self.buffers[d] for d in sorted(self.buffers, key=str)]


def tensors_checksum(named: Dict[str, torch.Tensor]) -> str:
    """SHA-1 of the names and exact bytes of ``named`` (sorted by name)."""
    digest = hashlib.sha1()
    for name in sorted(named):
        t = named[name].detach()
        raw = t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        digest.update(raw.data)
    return digest.hexdigest()
