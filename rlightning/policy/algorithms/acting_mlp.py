"""`mlp_act`: an `mlp`'s forward for acting, its tanh layers evaluated through sigmoid.

``tanh(z) = 2 * sigmoid(2 * z) - 1``, so a tanh MLP is exactly an MLP with sigmoid activations whose
Linear weights are transformed: the Linear before a tanh is scaled by 2 and the ``2 * s - 1`` after it
is folded into the next Linear (``W' = 2 W``, ``b' = b - W.sum(1)``). On some CPUs ``torch.tanh`` costs
about five times ``torch.sigmoid`` per element (half the time of a CartPole-sized forward pass); on
others it is as cheap or cheaper (0.3 against 0.4 ns per element on an AVX-512 Xeon here, where the
fold made local sampling 7-10 % slower). So the fold is used where it pays: `fold_pays` times both
once per process and folds only where tanh costs at least twice sigmoid (`set_fold` overrides it).
Where it pays, acting (no gradients, CPU) evaluates such a folded
copy; the folded weights are rebuilt whenever the network's weights change (autograd's version
counter of each weight and bias: every in-place write, a weight sync's ``copy_`` or an optimizer step,
bumps it; so does a parameter or layer replaced). Training keeps the tanh network (`mlp_forward`).
Only networks whose weights are written by copies should act this way: torch's fused Adam/AdamW step
writes around the version counter (PPO's learner acts with `mlp_forward`, its eval-role copies with this where
they do not act in numpy: `rlightning.policy.algorithms.numpy_acting`).

The result is the same function up to float rounding (``tests/policy/test_acting_mlp.py`` pins the
difference); writes that bypass the version counter (through ``.data`` or a numpy view of a
parameter) are not seen.
"""

from __future__ import annotations

import time
import weakref
from typing import Any, Callable, List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _module

from rlightning.policy.algorithms.networks import _LAYER_FNS, mlp_forward

__all__ = ["MIN_ROWS", "DerivedOps", "call_module", "derived_ops", "fold_pays", "fold_tanh", "mlp_act", "set_fold"]

MIN_ROWS = 16
"""Fewer rows go through `mlp_forward`: at 8 rows of a 64-wide MLP the fold saves nothing (per-call costs
dominate); it saves 12 % of the forward pass at 16 rows, 30 % at 48 and about 40 % at 128."""

_FOLDED: weakref.WeakKeyDictionary[nn.Module, DerivedOps] = weakref.WeakKeyDictionary()

PAYS_RATIO = 2.0
"""`fold_pays` folds where ``torch.tanh`` costs at least this many times ``torch.sigmoid`` per element: a wide
margin, so that timing noise does not decide (the CPUs measured so far are near 0.75 or near 5)."""

_fold: Optional[bool] = None  # None: not decided yet (`fold_pays` measures)


def set_fold(fold: Optional[bool]) -> Optional[bool]:
    """Fold (True), never fold (False), or let `fold_pays` measure this CPU again (None), from now on.

    Returns the setting before (None: not decided yet), to put it back.
    """
    global _fold
    before, _fold = _fold, (None if fold is None else bool(fold))
    return before


def _best_call_seconds(fn: Any, y: torch.Tensor, calls: int = 20, rounds: int = 5) -> float:
    """Best seconds per call of ``fn(y)`` over ``rounds`` rounds of ``calls`` calls."""
    fn(y)
    best = float("inf")
    for _ in range(rounds):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn(y)
        best = min(best, (time.perf_counter() - t0) / calls)
    return best


def fold_pays() -> bool:
    """True when acting folds tanh into sigmoid on this CPU (decided once per process, see `set_fold`).

    Times ``torch.tanh`` and ``torch.sigmoid`` on a ``[256, 64]`` block, the best of five rounds each (about a
    millisecond in all), and folds where tanh costs at least `PAYS_RATIO` times sigmoid.
    """
    global _fold
    if _fold is None:
        y = torch.randn(256, 64, generator=torch.Generator().manual_seed(0))
        with torch.no_grad():
            _fold = _best_call_seconds(torch.tanh, y) >= PAYS_RATIO * _best_call_seconds(torch.sigmoid, y)
    return _fold


class DerivedOps:
    """Ops derived from an `mlp`'s layers (``build(layers)``), and what they were built from, to tell when
    they are stale (`mlp_act`'s folded copy, `rlightning.policy.algorithms.numpy_acting`'s numpy copy)."""

    __slots__ = ("layers", "checks", "ops")

    def __init__(self, net: nn.Sequential, build: Callable[[Tuple[nn.Module, ...]], Any]) -> None:
        self.layers = tuple(net._modules.values())  # the layer objects when built
        # Per layer: the layer and its (name, tensor, version) of weight and bias (Linear) or nothing; holding
        # the tensors keeps them the same objects while this entry lives.
        self.checks = tuple(
            (
                layer,
                tuple(
                    (name, t, t._version)
                    for name, t in layer._parameters.items()
                    if type(layer) is nn.Linear and t is not None
                ),
            )
            for layer in self.layers
        )
        self.ops = build(self.layers)  # None: nothing to build (the caller's usual path)

    def usable(self, net: nn.Sequential) -> Optional[bool]:
        """True while ``net`` holds the same layers and tensors, none written since the build and no layer
        hooked; False when stale; None when a layer has a forward hook (then the module's own forward runs)."""
        if tuple(net._modules.values()) != self.layers:  # identity first: modules define no __eq__
            return False
        for layer, params in self.checks:
            if layer._forward_hooks or layer._forward_pre_hooks:
                return None
            current = layer._parameters
            for name, tensor, version in params:
                now = current[name]
                if now is not tensor or now._version != version:
                    return False
        return True


def derived_ops(cache: weakref.WeakKeyDictionary, net: nn.Sequential, build: Callable) -> Optional[DerivedOps]:
    """``cache[net]``, rebuilt with ``build`` when stale; None when a layer of ``net`` has a forward hook."""
    entry = cache.get(net)
    usable = entry.usable(net) if entry is not None else False
    if usable is False:
        entry = cache[net] = DerivedOps(net, build)
        usable = entry.usable(net)
    return entry if usable else None


def fold_tanh(layers: Tuple[nn.Module, ...]) -> Optional[List[tuple]]:
    """The ops of ``layers`` (an `mlp`'s) with every tanh between two Linears turned into a sigmoid.

    Returns a list of ``("linear", weight, bias)`` and ``("fn", function)`` entries, or None when no tanh
    can be folded (or a layer is neither Linear nor a `networks._LAYER_FNS` one).
    """
    if not layers or any(type(layer) is not nn.Linear and type(layer) not in _LAYER_FNS for layer in layers):
        return None
    folded = [
        0 < i < len(layers) - 1
        and type(layer) is nn.Tanh
        and type(layers[i - 1]) is nn.Linear
        and type(layers[i + 1]) is nn.Linear
        for i, layer in enumerate(layers)
    ]
    if not any(folded):
        return None
    ops: List[tuple] = []
    with torch.no_grad():
        for i, layer in enumerate(layers):
            if type(layer) is not nn.Linear:
                ops.append(("fn", torch.sigmoid if folded[i] else _LAYER_FNS[type(layer)]))
                continue
            weight = layer.weight.detach()
            w = weight.double()
            b = layer.bias.detach().double() if layer.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype)
            b = b.to(w.device)
            if i > 0 and folded[i - 1]:  # input h = 2 s - 1: W h + b = 2 W s + (b - W 1)
                b = b - w.sum(dim=1)
                w = 2.0 * w
            if i + 1 < len(layers) and folded[i + 1]:  # sigmoid(2 z) follows
                w, b = 2.0 * w, 2.0 * b
            ops.append(("linear", w.to(weight.dtype).contiguous(), b.to(weight.dtype)))
    return ops


def mlp_act(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` for acting: an `mlp`'s tanh layers through sigmoid (see the module docstring).

    Falls back to `mlp_forward` (so to ``net(x)`` where that does) where the fold does not pay on this CPU
    (`fold_pays`), with gradients enabled, off CPU, for fewer than `MIN_ROWS` rows, with forward hooks, or
    for a network with nothing to fold.
    """
    if (
        not fold_pays()
        or torch.is_grad_enabled()
        or x.dim() != 2
        or x.shape[0] < MIN_ROWS
        or x.device.type != "cpu"
        or type(net) is not nn.Sequential
        or net._forward_hooks
        or net._forward_pre_hooks
        or _module._global_forward_hooks
        or _module._global_forward_pre_hooks
    ):
        return mlp_forward(net, x)
    entry = derived_ops(_FOLDED, net, fold_tanh)
    if entry is None:  # a layer's hook: the module's forward
        return mlp_forward(net, x)
    ops = entry.ops
    if ops is None:
        return mlp_forward(net, x)
    for op in ops:
        x = F.linear(x, op[1], op[2]) if op[0] == "linear" else op[1](x)
    return x


def call_module(module: nn.Module, *args: Any) -> Any:
    """``module(*args)``, skipping ``nn.Module``'s call machinery when no hook of any kind is registered.

    The same computation (``forward``) either way; its submodules are called as usual. Per acting step the
    machinery costs about as much as a small encoder's forward.
    """
    if (
        module._forward_hooks
        or module._forward_pre_hooks
        or module._backward_hooks
        or module._backward_pre_hooks
        or _module._global_forward_hooks
        or _module._global_forward_pre_hooks
        or _module._global_backward_hooks
        or _module._global_backward_pre_hooks
        or getattr(module, "_compiled_call_impl", None) is not None  # torch.compile'd
        or torch._C._get_tracing_state()
    ):
        return module(*args)
    return module.forward(*args)
