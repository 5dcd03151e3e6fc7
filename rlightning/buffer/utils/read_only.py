"""`ReadOnlyTensor`: a tensor whose memory may be read, never written, and views of it that stay so.

A storage lends its rows to an on-policy learner as `ReadOnlyTensor` views instead of copying them
(`rlightning.buffer.utils.storage_read`). Any torch operation on one runs as usual; its results that
share memory with it (slices, rows, ``reshape``, ``view``, ``float()`` of a float tensor, ``numpy()``)
are read-only too, every other result (a gather by an index tensor, arithmetic) is a plain tensor. A
write into one (an in-place method, ``t[i] = x``, ``out=`` one of them) raises ``TypeError`` naming
the operation, so a learner can never change the stored rows it trains on.

    rows = as_read_only(ring["obs"][:n])
    rows[idx]            # a plain tensor: a copy
    rows[:8]             # a ReadOnlyTensor view
    rows[0] = 1.0        # TypeError: ... read-only ...
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch

__all__ = ["ReadOnlyTensor", "as_read_only", "read_only_dict"]

# In-place Python operators and item writes (their names do not end with "_").
_WRITING_DUNDERS = frozenset(
    {
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "__isub__",
        "__imul__",
        "__itruediv__",
        "__ifloordiv__",
        "__imod__",
        "__ipow__",
        "__iand__",
        "__ior__",
        "__ixor__",
        "__ilshift__",
        "__irshift__",
        "__imatmul__",
        "__idiv__",
    }
)


def _writes(name: str) -> bool:
    return name in _WRITING_DUNDERS or (name.endswith("_") and not name.endswith("__"))


def _ptr(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def _any_read_only(value: Any) -> bool:
    if isinstance(value, ReadOnlyTensor):
        return True
    if isinstance(value, (tuple, list)):
        return any(isinstance(v, ReadOnlyTensor) for v in value)
    return False


class ReadOnlyTensor(torch.Tensor):
    """A tensor that refuses writes; results sharing its memory are `ReadOnlyTensor` too (see the module)."""

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: tuple = (), kwargs: Optional[Dict] = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if (args and isinstance(args[0], ReadOnlyTensor) and _writes(name)) or _any_read_only(kwargs.get("out")):
            raise TypeError(
                f"{name}: this tensor is a read-only view of a buffer's stored rows; write into a copy "
                "(tensor.clone(), or TensorDict.clone()) instead"
            )
        with torch._C.DisableTorchFunctionSubclass():
            out = func(*args, **kwargs)
            if isinstance(out, np.ndarray):  # numpy(): the same memory
                out.flags.writeable = False
                return out
            if isinstance(out, torch.Tensor):
                return _mark(out, args)
            if isinstance(out, (tuple, list)) and any(isinstance(o, torch.Tensor) for o in out):
                return type(out)(_mark(o, args) for o in out)
            return out

    def __repr__(self, *, tensor_contents: Any = None) -> str:
        with torch._C.DisableTorchFunctionSubclass():
            text = torch.Tensor.__repr__(self.as_subclass(torch.Tensor))
        return "ReadOnlyTensor" + text[len("tensor") :] if text.startswith("tensor") else text


def _mark(out: Any, args: tuple) -> Any:
    """``out`` read-only where it shares memory with a read-only argument, else a plain tensor (called with
    torch functions of subclasses disabled)."""
    if not isinstance(out, torch.Tensor):
        return out
    ptr = _ptr(out) if out.numel() else None
    if ptr is not None and any(isinstance(a, ReadOnlyTensor) and _ptr(a) == ptr for a in args):
        return out if type(out) is ReadOnlyTensor else out.as_subclass(ReadOnlyTensor)
    return out if type(out) is torch.Tensor else out.as_subclass(torch.Tensor)


def as_read_only(t: torch.Tensor) -> ReadOnlyTensor:
    """A `ReadOnlyTensor` sharing ``t``'s memory (no copy)."""
    if isinstance(t, ReadOnlyTensor):
        return t
    return t.as_subclass(ReadOnlyTensor)


def read_only_dict(data: Dict[str, torch.Tensor]) -> Dict[str, ReadOnlyTensor]:
    """`as_read_only` of every value."""
    return {k: as_read_only(v) for k, v in data.items()}
