"""Recursive device and array conversions shared by the data types."""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Mapping, Optional, Sequence, Union

import numpy as np


class _NoTensor:
    """Stands for ``torch.Tensor`` while torch is not imported (then no value can be a tensor)."""


def _tensor_type() -> type:
    """``torch.Tensor`` once torch is imported; env workers never import it (it costs seconds per process)."""
    torch = sys.modules.get("torch")
    return torch.Tensor if torch is not None else _NoTensor


def map_arrays(value: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to every tensor or ndarray in ``value``, through dicts, lists and tuples."""
    if isinstance(value, (_tensor_type(), np.ndarray)):
        return fn(value)
    if isinstance(value, dict):
        return {k: map_arrays(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [map_arrays(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(map_arrays(v, fn) for v in value)
    return value


def concat_rows(items: Sequence[Any]) -> Any:
    """Batches (arrays, or dicts / tuples of them, as Dict and Tuple observations are) concatenated along their
    first axis, leaf by leaf."""
    first = items[0]
    if isinstance(first, Mapping):
        return {k: concat_rows([o[k] for o in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(concat_rows([o[i] for o in items]) for i in range(len(first)))
    return np.concatenate([np.asarray(o) for o in items], axis=0)


def leading_rows(batch: Any) -> int:
    """The first dimension of a batch (an array, or a dict / tuple of them)."""
    while isinstance(batch, (Mapping, tuple)):
        batch = next(iter(batch.values())) if isinstance(batch, Mapping) else batch[0]
    return int(np.shape(batch)[0])


def to_cpu(x: Any) -> Any:
    """Tensor to CPU; arrays are already host memory."""
    return x.cpu() if isinstance(x, _tensor_type()) else x


def to_numpy(x: Any) -> Any:
    """Tensor to ndarray (detached, on CPU); ndarrays unchanged."""
    return x.detach().cpu().numpy() if isinstance(x, _tensor_type()) else x


def cuda_fn(device: Optional[Union[str, int]] = None) -> Callable[[Any], Any]:
    """Return a function moving tensors and arrays to a CUDA device.

    Raises:
        RuntimeError: CUDA is not available in this process.
    """
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError("cuda() was called but CUDA is not available; use cpu() or check the worker's GPUs")
    if device is None:
        target = torch.device("cuda")
    elif isinstance(device, int):
        target = torch.device("cuda", device)
    else:
        target = torch.device(device)

    def move(x: Any) -> Any:
        if isinstance(x, np.ndarray):
            x = torch.from_numpy(x)
        return x.to(target, non_blocking=True)

    return move


def sent_latency(ts_ns: Any, now_ns: Optional[int] = None) -> float:
    """Seconds from a send timestamp to ``now_ns``; 0.0 when the stamp is missing or invalid."""
    if not isinstance(ts_ns, (int, np.integer)) or isinstance(ts_ns, bool) or ts_ns <= 0:
        return 0.0
    now = time.time_ns() if now_ns is None else now_ns
    latency = (now - int(ts_ns)) / 1e9
    return latency if latency >= 0 else 0.0
