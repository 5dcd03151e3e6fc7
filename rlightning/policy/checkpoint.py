"""Policy checkpoints: a policy's weights, optimizer states and counters as plain data.

Used by `PolicyWorkerHost` (``policy.host``), which reads and writes the files.

A checkpoint is a plain dict of tensors, numbers and strings written with
``torch.save`` and read with ``torch.load(weights_only=True)``, so loading
never runs pickled code.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Union

import numpy as np
import torch

from rlightning.types.convert import map_arrays
from rlightning.utils.logger import get_logger

if TYPE_CHECKING:
    from rlightning.policy.base_policy import BasePolicy

logger = get_logger(__name__)

CHECKPOINT_FORMAT = 1


def _cpu_clone(x: Any) -> Any:
    return x.detach().cpu().clone() if isinstance(x, torch.Tensor) else x


def checkpoint_state(policy: BasePolicy) -> Dict[str, Any]:
    """Everything needed to resume: module and optimizer states (on CPU), counters, config."""
    return {
        "format": CHECKPOINT_FORMAT,
        "policy_class": policy.policy_class_name(),
        "config": policy.config.model_dump(mode="json"),
        "modules": {n: {k: _cpu_clone(v) for k, v in m.state_dict().items()} for n, m in policy.modules.items()},
        "optimizers": {n: map_arrays(o.state_dict(), _cpu_clone) for n, o in policy.optimizers.items()},
        "counters": {
            "weight_version": int(policy.weight_version),
            "update_count": int(policy.update_count),
            "train_calls": int(policy.train_calls),
        },
        "extra": map_arrays(policy.extra_checkpoint_state(), _cpu_clone),
        # What the last train() reported (an algorithm that updates its actor every few calls repeats it).
        "last_metrics": {k: float(v) for k, v in policy._last_metrics.items() if isinstance(v, (int, float))},
    }


def load_checkpoint_state(policy: BasePolicy, state: Dict[str, Any]) -> Dict[str, int]:
    """Restore a `checkpoint_state` dict into ``policy``. Nothing is changed unless every module matches.

    Returns:
        The restored counters.

    Raises:
        RuntimeError: the networks are not built yet.
        ValueError: not a checkpoint, or a tensor shape differs.
        KeyError: modules or keys missing or unexpected.
    """
    if not isinstance(state, dict) or "modules" not in state or "format" not in state:
        raise ValueError("not an rlightning policy checkpoint: expected a dict with 'format' and 'modules'")
    state = policy.upgrade_checkpoint_state(state)
    own_modules, optimizers = policy.modules, policy.optimizers
    if not own_modules:
        raise RuntimeError(f"{type(policy).__name__}: load a checkpoint after construct_network(env_meta)")
    modules = state["modules"]
    missing = sorted(set(own_modules) - set(modules))
    unexpected = sorted(set(modules) - set(own_modules))
    if str(policy.role_type) == "eval":
        unexpected = []  # eval workers build only what acting needs (no critics, no targets)
    if missing or unexpected:
        older = ""
        if state.get("policy_class") == policy.policy_class_name():
            older = (
                "; it is a checkpoint of the same policy class with other modules, so it was written by another "
                "version of rlightning (older checkpoints lack modules added since, such as DQN's 'progress'): "
                "load it with the version that wrote it, or train again"
            )
        raise KeyError(
            f"checkpoint of {state.get('policy_class')!r} does not fit {policy.policy_class_name()}: "
            f"missing modules {missing}, unexpected modules {unexpected}{older}"
        )
    for name, module in own_modules.items():
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
    for name, module in own_modules.items():
        module.load_state_dict(modules[name])
    for name, opt_state in state.get("optimizers", {}).items():
        if name in optimizers:
            optimizers[name].load_state_dict(opt_state)
        else:
            logger.debug("checkpoint optimizer %r has no counterpart here (eval worker?)", name)
    counters = state.get("counters", {})
    policy.weight_version = int(counters.get("weight_version", 0))
    policy.update_count = int(counters.get("update_count", 0))
    policy.train_calls = int(counters.get("train_calls", 0))
    policy.load_extra_checkpoint_state(state.get("extra", {}))
    if isinstance(state.get("last_metrics"), dict):
        policy._last_metrics = dict(state["last_metrics"])
    return {
        "weight_version": policy.weight_version,
        "update_count": policy.update_count,
        "train_calls": policy.train_calls,
    }


def read_checkpoint(path: Union[str, os.PathLike]) -> Dict[str, Any]:
    """Read a checkpoint file with ``torch.load(weights_only=True)`` (no pickled code runs).

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"policy checkpoint {str(p)!r} does not exist")
    return torch.load(p, map_location="cpu", weights_only=True)


def worker_rng_state(policy: BasePolicy, process: bool = False) -> Dict[str, Any]:
    """``policy``'s own generator state (``np_rng``: epsilon-greedy and exploration draws) and its acting counters
    (the rows it answered drive DQN's and TD3's schedules between weight syncs), as plain data for an engine
    checkpoint; with ``process``, also the torch (and CUDA), numpy and python generators of its process (those of
    a Ray worker; a worker in the driver shares the driver's, which the engine checkpoint keeps)."""
    rng = getattr(policy, "np_rng", None)
    out: Dict[str, Any] = {
        "np_rng": dict(rng.bit_generator.state) if isinstance(rng, np.random.Generator) else None,
        "rollout_calls": int(policy._rollout_calls),
        "rollout_rows": int(policy._rollout_rows),
    }
    if process:
        np_state = np.random.get_state()
        out["process"] = {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "numpy_pos": int(np_state[2]),
            "python": torch.tensor([int(x) for x in random.getstate()[1]], dtype=torch.int64),
        }
    return out


def set_worker_rng_state(policy: BasePolicy, state: Dict[str, Any]) -> None:
    """Restore what `worker_rng_state` returned (the process generators only when it holds them).

    Raises:
        TypeError: ``state`` is not a dict.
    """
    if not isinstance(state, dict):
        raise TypeError(f"set_rng_state(state=...) needs the dict rng_state returned, got {type(state).__name__}")
    rng = getattr(policy, "np_rng", None)
    if isinstance(state.get("np_rng"), dict) and isinstance(rng, np.random.Generator):
        rng.bit_generator.state = state["np_rng"]
    policy._rollout_calls = int(state.get("rollout_calls", policy._rollout_calls))
    policy._rollout_rows = int(state.get("rollout_rows", policy._rollout_rows))
    proc = state.get("process")
    if isinstance(proc, dict):
        torch.set_rng_state(proc["torch"])
        if proc.get("cuda") and torch.cuda.is_available() and len(proc["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(proc["cuda"])
        np.random.set_state(("MT19937", proc["numpy_keys"].numpy().astype(np.uint32), int(proc["numpy_pos"]), 0, 0.0))
        random.setstate((3, tuple(int(x) for x in proc["python"].tolist()), None))
