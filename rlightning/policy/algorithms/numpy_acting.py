"""Acting through numpy: an `mlp`'s forward pass, a categorical draw and its log-probability without torch ops.

An eval-role copy acts once per env step on a few to a few hundred rows. At that size each torch op
costs its dispatch (a few microseconds), and in a rollout, where the env's step, the record writes and
Ray's calls run between two forward passes, the dispatcher's code and data are cold: PPO's
``compute_actions`` on 8 CartPole rows took 72 us of CPU in a tight loop and 270 us per call in the
per-step Ray rollout (the same process, the same calls, measured with ``time.thread_time``). The same
forward pass in numpy (one ``@``, one bias add and one in-place activation per layer) costs about as much
in a tight loop and much less in the rollout (175 us), and the draw and its log-probability are a handful of
ufuncs. It is the same function up to float rounding (float32 products in another order).

The categorical draw is the Gumbel-max draw of `rlightning.policy.algorithms.networks.categorical_draw`
(on the logits, with ``rng.gumbel``) from the copy's own numpy generator (``np_rng``, seeded in
`BasePolicy.setup` beside torch's), so no torch op is left on the acting path. Learning does not tell the
two draws apart: over seeds 1-40, APPO on CartPole evaluated at 377 +- 22 (numpy's draw) and 390 +- 20
(torch's) at 100k env steps, and PPO (``cartpole_ppo_fast``) solved at a mean of 31.9k and 32.1k env steps
(``benchmarks/README.md``, ninth session).

`mlp_numpy` keeps a numpy copy of each network's weights (``W.T`` contiguous, float32), rebuilt when
the network's weights change: the version counters `rlightning.policy.algorithms.acting_mlp` reads
(weight syncs write with ``copy_``). Only plain `mlp` networks on the CPU (Linear, Tanh and ReLU layers,
float32, no hooks) have one; for anything else it returns None and the caller acts with torch.
"""

from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn
from torch.nn.modules import module as _module

from rlightning.policy.algorithms.acting_mlp import DerivedOps, derived_ops
from rlightning.policy.networks.masks import mask_logits_np

__all__ = [
    "act_categorical_np",
    "categorical_draw_np",
    "log_normalizer",
    "mlp_numpy",
    "numpy_ops",
    "rows_of",
    "values_np",
]

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


_ROWS = np.arange(0, dtype=np.intp)  # 0..n-1, grown on demand (rows_of's row index)


def rows_of(values: np.ndarray, index: np.ndarray) -> np.ndarray:
    """``values[i, index[i]]`` for every row ``i`` of ``values`` ``[rows, K]``."""
    global _ROWS
    n = values.shape[0]
    if _ROWS.shape[0] < n:
        _ROWS = np.arange(max(n, 2 * _ROWS.shape[0]), dtype=np.intp)
    return values[_ROWS[:n], index]


def categorical_draw_np(logits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw per row of the categorical distributions with logits (or log-probabilities) ``[rows, K]``.

    The Gumbel-max draw with numpy's generator ``rng``: the argmax of ``logits + g``, ``g`` standard Gumbel
    samples (``rng.gumbel``, always finite). An action of probability 0 (``-inf``) is never drawn. Returns
    int64 ``[rows]``.
    """
    return np.argmax(logits + rng.gumbel(size=logits.shape), axis=-1).astype(np.int64, copy=False)


SMALL_K = 4
"""Up to this many actions `log_normalizer` is one ``np.logaddexp.reduce`` (3.1 us against 8.3 us for the
max-shifted log-sum-exp on ``[64, 2]``, and one numpy call instead of five where caches are cold); beyond it the
reduce, a loop over the actions, is the slower (31 us against 10 us at 18 actions)."""


def log_normalizer(logits: np.ndarray) -> np.ndarray:
    """``log(sum(exp(logits)))`` per row of ``[rows, K]``, without overflow (float32 ``[rows]``)."""
    if logits.shape[-1] <= SMALL_K:
        return np.logaddexp.reduce(logits, axis=-1)
    top = logits.max(axis=-1)
    out = np.exp(logits - top[:, None]).sum(axis=-1)
    np.log(out, out=out)
    out += top
    return out


def act_categorical_np(
    features: Optional[np.ndarray],
    actor: nn.Module,
    critic: Optional[nn.Module],
    deterministic: bool,
    rng: np.random.Generator,
    mask: Optional[np.ndarray] = None,
) -> Optional[Dict[str, Any]]:
    """An actor-critic's acting step in numpy: ``action`` (from 0), ``log_prob`` and ``value``, each ``[rows]``.

    ``features``: the encoder's numpy features ``[rows, in]`` (None: it has none). The action is the mode
    when ``deterministic``, else a draw from ``rng``, among the actions ``mask`` allows (`mask_logits_np`).
    ``critic`` None: no ``value``. None where a network has no numpy copy (`mlp_numpy`): then the caller acts
    in torch.
    """
    if features is None:
        return None
    value = None
    if critic is not None:
        value = mlp_numpy(critic, features)
        if value is None:
            return None
    logits = mlp_numpy(actor, features)
    if logits is None:
        return None
    if mask is not None:
        logits = mask_logits_np(logits, mask)
    # The draw and the mode need no normalisation; the log-probability only the chosen entry's.
    if deterministic:
        sample = logits.argmax(axis=-1).astype(np.int64, copy=False)
    else:
        sample = categorical_draw_np(logits, rng)
    log_prob = rows_of(logits, sample)
    log_prob -= log_normalizer(logits)
    out = {"action": sample, "log_prob": log_prob}
    if value is not None:
        out["value"] = value.reshape(-1)
    return out


VALUE_BLOCK = 512
"""Rows per block of `values_np`: a block's hidden activations stay in the core's cache. For the 64-unit
layers of the CartPole presets, per 128 rows: 18.7 us in blocks of 512, 19.2 in blocks of 128, 28.8 in blocks
of 1024, 123 for a 2x64 rollout's 8256 observations at once (one core, float32)."""


def values_np(features: np.ndarray, critic: nn.Module) -> Optional[np.ndarray]:
    """``critic(features)[:, 0]`` in numpy, ``VALUE_BLOCK`` rows at a time (float32 ``[rows]``); None where the
    critic has no numpy copy (`mlp_numpy`)."""
    rows = features.shape[0]
    out = np.empty(rows, dtype=np.float32)
    for start in range(0, rows, VALUE_BLOCK):
        value = mlp_numpy(critic, features[start : start + VALUE_BLOCK])
        if value is None:
            return None
        out[start : start + VALUE_BLOCK] = value.reshape(-1)
    return out
