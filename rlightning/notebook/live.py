"""Live changes to a built run: which hyperparameters ``Run.set`` may change, and a config that says so.

A built run's policy, env, buffer and cluster settings were copied into its workers when they
started; assigning them afterwards would change nothing. `freeze_built_config` makes such an
assignment raise, pointing at ``run.set`` (for what can change live) or at rebuilding.
"""

from __future__ import annotations

import copy
import typing
from typing import Any, Dict, List, Tuple

from pydantic import BaseModel

from rlightning.utils.config import ConfigError

#: Sub-configs of a built run that no longer take effect when assigned (``train``, ``log`` and ``seed`` still do).
BUILT_SECTIONS = ("policy", "env", "buffer", "cluster")
#: Optimizer fields ``Run.set`` can change (as ``lr`` etc., without the ``optim.`` prefix).
OPTIM_SETTABLE = ("lr",)
#: Fields a buffer postprocess captured at build time (GAE): changing them on the learner would do nothing.
POSTPROCESS_FIELDS = ("gamma", "gae_lambda")


class BuiltConfigError(ConfigError):
    """A field of a built run's config was assigned; it no longer takes effect."""


def _is_float_field(annotation: Any) -> bool:
    kinds = typing.get_args(annotation) or (annotation,)
    return float in kinds


def settable_hyperparameters(policy_cfg: BaseModel, has_postprocess: bool = False) -> List[str]:
    """Names ``Run.set`` accepts for this policy config: its float fields and the optimizer's ``lr``.

    Read from the config object's own fields, so an algorithm's config class brings its own.
    """
    names = [name for name, field in type(policy_cfg).model_fields.items() if _is_float_field(field.annotation)]
    if has_postprocess:
        names = [n for n in names if n not in POSTPROCESS_FIELDS]
    if hasattr(policy_cfg, "optim"):
        names += [n for n in OPTIM_SETTABLE if n not in names]
    return sorted(names)


def validate_hyperparameters(policy_cfg: BaseModel, settable: List[str], values: Dict[str, Any]) -> Dict[str, float]:
    """Check names and values against the config's own validation; returns the values as floats.

    Raises:
        KeyError: an unknown name (the message lists the settable ones).
        ValueError: a value the config field rejects.
    """
    if not values:
        raise ValueError(f"run.set() needs at least one name=value; settable: {', '.join(settable)}")
    trial = _thaw(copy.deepcopy(policy_cfg))
    out: Dict[str, float] = {}
    for name, value in values.items():
        if name not in settable:
            raise KeyError(
                f"run.set({name}=...): {name!r} cannot be changed on a built run; settable: {', '.join(settable)} "
                "(anything else: edit the config and lab.build(cfg) again)"
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"run.set({name}={value!r}): expected a number")
        target = trial.optim if name in OPTIM_SETTABLE and name not in type(trial).model_fields else trial
        setattr(target, name, float(value))  # the config's own validation (ranges) raises here
        out[name] = float(value)
    return out


def record_hyperparameters(policy_cfg: BaseModel, values: Dict[str, float]) -> None:
    """Write values applied by ``Run.set`` into the (frozen) config the run shows."""
    for name, value in values.items():
        target = (
            policy_cfg.optim if name in OPTIM_SETTABLE and name not in type(policy_cfg).model_fields else policy_cfg
        )
        BaseModel.__setattr__(target, name, value)


# ---------------------------------------------------------------------------- frozen sub-configs
_FROZEN: Dict[type, type] = {}
_META: Dict[int, Tuple[str, List[str]]] = {}  # id(frozen model) -> (its path, the settable names)


def _identity(value: Any) -> Any:
    return value


def _frozen_class(cls: type, path_hint: str) -> type:
    if cls in _FROZEN:
        return _FROZEN[cls]

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if name.startswith("_"):
            return cls.__setattr__(self, name, value)
        where, settable = _META.get(id(self), (type(self).__name__, []))
        path = f"{where}.{name}"
        leaf = name
        hint = (
            f"use run.set({leaf}={value!r}) to change it from the next iteration"
            if leaf in settable
            else f"run.set can change {', '.join(settable) or 'nothing here'}"
        )
        raise BuiltConfigError(
            f"{path} of a built run no longer takes effect (its workers have their own copy); {hint}, "
            "or edit the config and lab.build(cfg) again"
        )

    def __deepcopy__(self: Any, memo: Any = None) -> Any:
        return _thaw(cls.__deepcopy__(self, memo))

    def __copy__(self: Any) -> Any:
        return _thaw(cls.__copy__(self), deep=False)

    def __reduce_ex__(self: Any, protocol: Any) -> Any:
        return (_identity, (copy.deepcopy(self),))  # pickled as the plain class (Ray ships configs)

    frozen = type(
        f"Built{cls.__name__}",
        (cls,),
        {
            "__setattr__": __setattr__,
            "__deepcopy__": __deepcopy__,
            "__copy__": __copy__,
            "__reduce_ex__": __reduce_ex__,
            "__module__": cls.__module__,
            "__doc__": cls.__doc__,
        },
    )
    _FROZEN[cls] = frozen
    return frozen


def _children(model: BaseModel):
    for name in type(model).model_fields:
        value = model.__dict__.get(name)
        if isinstance(value, BaseModel):
            yield name, value


def _freeze(model: BaseModel, path: str, settable: List[str]) -> None:
    for name, child in _children(model):
        _freeze(child, f"{path}.{name}", settable)
    _META[id(model)] = (path, settable)
    object.__setattr__(model, "__class__", _frozen_class(type(model), path))


def _thaw(model: Any, deep: bool = True) -> Any:
    """Turn frozen models (and, when ``deep``, their children) back into their plain classes."""
    if not isinstance(model, BaseModel):
        return model
    cls = type(model)
    base = next((orig for orig, frozen in _FROZEN.items() if frozen is cls), None)
    if base is not None:
        object.__setattr__(model, "__class__", base)
        _META.pop(id(model), None)
    if deep:
        for _, child in _children(model):
            _thaw(child)
    return model


def freeze_built_config(cfg: BaseModel, settable: List[str]) -> None:
    """Replace ``cfg.policy/env/buffer/cluster`` by copies whose assignments raise `BuiltConfigError`."""
    for section in BUILT_SECTIONS:
        sub = cfg.__dict__.get(section)
        if isinstance(sub, BaseModel):
            # A copy: workers built in this process may hold the original object and keep changing it.
            sub = cfg.__dict__[section] = copy.deepcopy(sub)
            _freeze(sub, f"run.config.{section}", settable)
