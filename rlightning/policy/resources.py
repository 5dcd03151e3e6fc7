"""Where a policy worker runs: its device and its CPU threads.

CUDA is used only when the worker was given a GPU (Ray assigned it one, or a
local worker was asked for one) *and* CUDA is present; everything else runs on
CPU. Ray is never imported here: it is looked up in ``sys.modules``.
"""

from __future__ import annotations

import math
import os
import sys
from typing import Any, Dict, List, Optional

import torch

from rlightning.utils.logger import get_logger

logger = get_logger(__name__)


def _ray_module() -> Optional[Any]:
    ray = sys.modules.get("ray")
    if ray is None:
        return None
    try:
        return ray if ray.is_initialized() else None
    except Exception:  # noqa: BLE001 - a half-imported ray
        return None


def in_ray_actor() -> bool:
    """True when this code runs inside a Ray actor process."""
    ray = _ray_module()
    if ray is None:
        return False
    try:
        return ray.get_runtime_context().get_actor_id() is not None
    except Exception:  # noqa: BLE001
        return False


def ray_assigned_cpus() -> Optional[float]:
    """CPUs Ray reserved for this actor (None outside an actor)."""
    ray = _ray_module()
    if ray is None or not in_ray_actor():
        return None
    try:
        return float(ray.get_runtime_context().get_assigned_resources().get("CPU", 0.0))
    except Exception:  # noqa: BLE001
        return None


def ray_gpu_ids() -> List[int]:
    """GPU ids Ray assigned to this actor (empty outside an actor or without GPUs)."""
    ray = _ray_module()
    if ray is None or not in_ray_actor():
        return []
    try:
        return [int(g) for g in ray.get_gpu_ids()]
    except Exception:  # noqa: BLE001
        return []


def threads_for(num_cpus: Optional[float]) -> int:
    """Torch threads for a worker given ``num_cpus`` logical CPUs (at least 1)."""
    if num_cpus is None or num_cpus <= 0:
        return 1
    return max(1, math.floor(num_cpus))


def select_device(num_gpus: float = 0.0, gpu_ids: Optional[List[int]] = None) -> torch.device:
    """Pick the device of a worker.

    Args:
        num_gpus: GPUs the worker was asked for (local workers).
        gpu_ids: GPU ids Ray assigned to the worker (remote workers); non-empty wins.

    Returns:
        ``cuda:<current>`` when the worker has a GPU and CUDA is available, else ``cpu``.
    """
    wants_gpu = bool(gpu_ids) or num_gpus > 0
    if wants_gpu and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    if wants_gpu:
        logger.warning("worker was given %s GPU(s) but CUDA is not available here; using CPU", gpu_ids or num_gpus)
    return torch.device("cpu")


def describe_process() -> Dict[str, Any]:
    """Pid, CUDA availability and Ray-assigned GPUs of this process."""
    return {
        "pid": os.getpid(),
        "cuda_available": bool(torch.cuda.is_available()),
        "ray_gpu_ids": ray_gpu_ids(),
        "in_ray_actor": in_ray_actor(),
    }
