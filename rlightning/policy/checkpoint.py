"""`CheckpointMixin`: save and load a policy's weights, optimizer states and counters.

A checkpoint is a plain dict of tensors, numbers and strings written with
``torch.save`` and read with ``torch.load(weights_only=True)``, so loading
never runs pickled code.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, Union

import torch

from rlightning.types.convert import map_arrays
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

CHECKPOINT_FORMAT = 1


def _cpu_clone(x: Any) -> Any:
    return x.detach().cpu().clone() if isinstance(x, torch.Tensor) else x


class CheckpointMixin:
    """Checkpoint save/load for `BasePolicy`."""

    def extra_checkpoint_state(self) -> Dict[str, Any]:
        """Algorithm state beyond modules and optimizers (plain values or tensors); default none."""
        return {}

    def load_extra_checkpoint_state(self, extra: Dict[str, Any]) -> None:
        """Restore what `extra_checkpoint_state` returned."""

    def checkpoint_state(self) -> Dict[str, Any]:
        """Everything needed to resume: module and optimizer states (on CPU), counters, config."""
        return {
            "format": CHECKPOINT_FORMAT,
            "policy_class": self.policy_class_name(),
            "config": self.config.model_dump(mode="json"),
            "modules": {n: {k: _cpu_clone(v) for k, v in m.state_dict().items()} for n, m in self._modules.items()},
            "optimizers": {n: map_arrays(o.state_dict(), _cpu_clone) for n, o in self._optimizers.items()},
            "counters": {
                "weight_version": int(self.weight_version),
                "update_count": int(self.update_count),
                "train_calls": int(self.train_calls),
            },
            "extra": map_arrays(self.extra_checkpoint_state(), _cpu_clone),
        }

    def load_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, int]:
        """Restore a `checkpoint_state` dict. Nothing is changed unless every module matches.

        Returns:
            The restored counters.

        Raises:
            RuntimeError: the networks are not built yet.
            ValueError: not a checkpoint, or a tensor shape differs.
            KeyError: modules or keys missing or unexpected.
        """
        if not isinstance(state, dict) or "modules" not in state or "format" not in state:
            raise ValueError("not an rlightning policy checkpoint: expected a dict with 'format' and 'modules'")
        if not self._modules:
            raise RuntimeError(f"{type(self).__name__}: load a checkpoint after construct_network(env_meta)")
        modules = state["modules"]
        missing = sorted(set(self._modules) - set(modules))
        unexpected = sorted(set(modules) - set(self._modules))
        if str(getattr(self, "role_type", "train")) == "eval":
            unexpected = []  # eval workers build only what acting needs (no critics, no targets)
        if missing or unexpected:
            raise KeyError(
                f"checkpoint of {state.get('policy_class')!r} does not fit {self.policy_class_name()}: "
                f"missing modules {missing}, unexpected modules {unexpected}"
            )
        for name, module in self._modules.items():
            own = module.state_dict()
            saved = modules[name]
            if set(own) != set(saved):
                raise KeyError(
                    f"checkpoint module {name!r}: missing keys {sorted(set(own) - set(saved))[:8]}, "
                    f"unexpected keys {sorted(set(saved) - set(own))[:8]}"
                )
            for key, value in own.items():
                if tuple(saved[key].shape) != tuple(value.shape):
                    raise ValueError(
                        f"checkpoint module {name!r} key {key!r} has shape {tuple(saved[key].shape)}, "
                        f"the network has {tuple(value.shape)}"
                    )
        for name, module in self._modules.items():
            module.load_state_dict(modules[name])
        for name, opt_state in state.get("optimizers", {}).items():
            if name in self._optimizers:
                self._optimizers[name].load_state_dict(opt_state)
            else:
                logger.debug("checkpoint optimizer %r has no counterpart here (eval worker?)", name)
        counters = state.get("counters", {})
        self.weight_version = int(counters.get("weight_version", 0))
        self.update_count = int(counters.get("update_count", 0))
        self.train_calls = int(counters.get("train_calls", 0))
        self.load_extra_checkpoint_state(state.get("extra", {}))
        return {
            "weight_version": self.weight_version,
            "update_count": self.update_count,
            "train_calls": self.train_calls,
        }

    def save_checkpoint(self, path: Union[str, os.PathLike]) -> str:
        """Write `checkpoint_state` to ``path`` (parent folders are created); returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        torch.save(self.checkpoint_state(), p)
        return str(p)

    def load_checkpoint(self, path: Union[str, os.PathLike]) -> Dict[str, int]:
        """Read a checkpoint with ``torch.load(weights_only=True)`` and restore it.

        Raises:
            FileNotFoundError: no file at ``path``.
        """
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"policy checkpoint {str(p)!r} does not exist")
        state = torch.load(p, map_location="cpu", weights_only=True)
        return self.load_checkpoint_state(state)
