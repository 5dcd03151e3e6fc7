"""The learner's arithmetic for the duration of an update: subnormal flushing and float32 matmul precision.

    with update_numerics(policy.config.optim, policy.device):
        metrics = policy.train()

`BasePolicy.learn` (what the policy group calls on a train worker) runs each learner call in this scope, and
`PolicyWorkerHost.apply_gradients` runs its backward and optimizer step in it (for an algorithm driven by
hand). Scopes nest: the outermost one of a thread sets and restores, the inner ones change nothing.

- ``optim.flush_denormals``: ``torch.set_flush_denormal(True)`` (this thread), switched off again after.
- ``optim.matmul_precision``: ``torch.set_float32_matmul_precision`` (the process), the previous value
  restored after. On the CPU, ``"high"`` and ``"medium"`` are applied only where the CPU has bfloat16 units
  (`cpu_has_bf16_units`); elsewhere oneDNN would emulate bfloat16, slower than float32. None: as the process
  has it.

Pure torch; never imports Ray.
"""

from __future__ import annotations

import functools
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import torch

__all__ = ["cpu_has_bf16_units", "effective_matmul_precision", "update_numerics"]

_STATE = threading.local()


@functools.cache
def cpu_has_bf16_units() -> bool:
    """True when this CPU multiplies bfloat16 in hardware (AMX tiles or AVX512-BF16), as torch reports it
    (asked once per process: every update reads it)."""
    cpu = getattr(torch, "cpu", None)
    for name in ("_is_amx_tile_supported", "_is_avx512_bf16_supported"):
        probe = getattr(cpu, name, None)
        try:
            if probe is not None and bool(probe()):
                return True
        except Exception:  # noqa: BLE001 - a probe torch cannot answer counts as no
            continue
    return False


def effective_matmul_precision(requested: Optional[str], device: Any) -> Optional[str]:
    """The precision `update_numerics` applies for ``requested`` on ``device`` (None: leave the process's).

    ``"high"``/``"medium"`` on a CPU without bfloat16 units is ``"highest"``.
    """
    if requested is None or requested == "highest":
        return requested
    if torch.device(device).type == "cpu" and not cpu_has_bf16_units():
        return "highest"
    return requested


@contextmanager
def update_numerics(optim_cfg: Any, device: Any) -> Iterator[None]:
    """Apply ``optim_cfg``'s ``flush_denormals`` and ``matmul_precision`` until the block ends (see the module)."""
    if getattr(_STATE, "active", False):
        yield
        return
    flushing = bool(getattr(optim_cfg, "flush_denormals", False)) and torch.set_flush_denormal(True)
    precision = effective_matmul_precision(getattr(optim_cfg, "matmul_precision", None), device)
    previous = torch.get_float32_matmul_precision()
    changed = precision is not None and precision != previous
    if changed:
        torch.set_float32_matmul_precision(precision)
    _STATE.active = True
    try:
        yield
    finally:
        _STATE.active = False
        if changed:
            torch.set_float32_matmul_precision(previous)
        if flushing:
            torch.set_flush_denormal(False)
