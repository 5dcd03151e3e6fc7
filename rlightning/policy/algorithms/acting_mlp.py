"""Acting helpers shared by the policies' forward passes: `call_module` (a module's forward without
``nn.Module``'s call machinery when nothing hooks it) and `derived_ops` (ops derived from an `mlp`'s layers,
rebuilt when its weights change: the numpy copy of `rlightning.policy.algorithms.numpy_acting`).

A derived copy is rebuilt whenever the network's weights change: autograd's version counter of each weight and
bias (every in-place write, a weight sync's ``copy_`` or an optimizer step bumps it; so does a parameter or
layer replaced). Writes that bypass the version counter (through ``.data`` or a numpy view of a parameter) are
not seen.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Optional, Tuple

import torch
from torch import nn
from torch.nn.modules import module as _module

__all__ = ["DerivedOps", "call_module", "derived_ops"]


class DerivedOps:
    """Ops derived from an `mlp`'s layers (``build(layers)``), and what they were built from, to tell when
    they are stale (`rlightning.policy.algorithms.numpy_acting`'s numpy copy)."""

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
