"""Acting through numpy: an `mlp`'s forward pass and a log-softmax without torch ops.

An eval-role copy acts once per env step on a few to a few hundred rows. At that size each torch op
costs its dispatch (a few microseconds), and in a rollout, where the env's step, the record writes and
Ray's calls run between two forward passes, the dispatcher's code and data are cold: PPO's
``compute_actions`` on 8 CartPole rows took 72 us of CPU in a tight loop and 270 us per call in the
per-step Ray rollout (the same process, the same calls, measured with ``time.thread_time``). The same
forward pass in numpy (one ``@``, one bias add and one in-place activation per layer) costs about as much
in a tight loop and much less in the rollout (175 us), and the log-softmax is a handful of ufuncs. It is the
same function up to float rounding (float32 products in another order).

The categorical draw stays torch's (`rlightning.policy.algorithms.networks.categorical_draw` on the numpy
log-probabilities, a view). The same Gumbel-max draw from numpy's own generator would be faster still in the
rollout, but with it APPO on CartPole learned worse at 100k env steps (seeds 11-18: mean evaluation 322
with the copy's seeded generator, 374 with an unseeded one, against 454 with torch's draw, the numpy
forward pass in all three), for a reason not found; with torch's draw the draws come from the stream the
torch path draws from.

`mlp_numpy` keeps a numpy copy of each network's weights (``W.T`` contiguous, float32), rebuilt when
the network's weights change: the version counters `rlightning.policy.algorithms.acting_mlp` reads
(weight syncs write with ``copy_``). Only plain `mlp` networks on the CPU (Linear, Tanh and ReLU layers,
float32, no hooks) have one; for anything else it returns None and the caller acts with torch.
"""

from __future__ import annotations

import weakref
from typing import List, Optional, Tuple

import numpy as np
import torch
from torch import nn
from torch.nn.modules import module as _module

from rlightning.policy.algorithms.acting_mlp import DerivedOps, derived_ops

__all__ = ["log_softmax_np", "mlp_numpy", "numpy_ops", "rows_of"]

_NUMPY: weakref.WeakKeyDictionary[nn.Module, DerivedOps] = weakref.WeakKeyDictionary()
_ACTIVATIONS = {nn.Tanh: "tanh", nn.ReLU: "relu"}


def numpy_ops(layers: Tuple[nn.Module, ...]) -> Optional[List[tuple]]:
    """``layers`` (an `mlp`'s) as numpy ops: ``("linear", W.T, b or None)``, ``("tanh",)``, ``("relu",)``.

    None when a layer is of another kind, or a weight is not a float32 CPU tensor.
    """
    if not layers or type(layers[0]) is not nn.Linear:
        return None
    ops: List[tuple] = []
    for layer in layers:
        if type(layer) in _ACTIVATIONS:
            ops.append((_ACTIVATIONS[type(layer)],))
            continue
        if type(layer) is not nn.Linear:
            return None
        weight, bias = layer.weight, layer.bias
        if weight.dtype != torch.float32 or weight.device.type != "cpu":
            return None
        w = np.ascontiguousarray(weight.detach().numpy().T)
        b = None if bias is None else bias.detach().numpy().copy()
        ops.append(("linear", w, b))
    return ops


def mlp_numpy(net: nn.Module, x: np.ndarray) -> Optional[np.ndarray]:
    """``net(x)`` in numpy for an `mlp` on the CPU (see the module docstring); None where it has no numpy copy.

    ``x``: float32 ``[rows, in]``. None for anything but a plain ``nn.Sequential`` of Linear, Tanh and ReLU
    layers with float32 CPU weights, or when the network, a layer or a global hook is registered.
    """
    if (
        type(net) is not nn.Sequential
        or net._forward_hooks
        or net._forward_pre_hooks
        or _module._global_forward_hooks
        or _module._global_forward_pre_hooks
        or x.dtype != np.float32
        or x.ndim != 2
    ):
        return None
    entry = derived_ops(_NUMPY, net, numpy_ops)
    if entry is None or entry.ops is None:
        return None
    h = x
    for op in entry.ops:
        kind = op[0]
        if kind == "linear":
            h = h @ op[1]  # a new array: the in-place ops below never touch the caller's
            if op[2] is not None:
                h += op[2]
        elif kind == "tanh":
            np.tanh(h, out=h)
        else:
            np.maximum(h, 0.0, out=h)
    return h


def log_softmax_np(logits: np.ndarray) -> np.ndarray:
    """Log-probabilities of the categorical distributions with ``logits`` ``[rows, K]`` (a new array)."""
    z = logits - logits.max(axis=-1, keepdims=True)
    z -= np.log(np.exp(z).sum(axis=-1, keepdims=True))
    return z


def rows_of(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[i, index[i]]`` for every row ``i`` of ``values`` ``[rows, K]``."""
    return np.take_along_axis(values, index[:, None], axis=-1)[:, 0]
