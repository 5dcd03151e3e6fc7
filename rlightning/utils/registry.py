"""Name -> class registries for the pluggable parts (buffers, envs, policies, engines)."""

from __future__ import annotations

import difflib
import importlib
from typing import Callable, Dict, Iterator, List, Optional, TypeVar

T = TypeVar("T")


def closest(name: str, choices: List[str], n: int = 3) -> List[str]:
    """Return up to ``n`` names from ``choices`` closest to ``name``."""
    lowered = {c.lower(): c for c in choices}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    return [lowered[h] for h in hits]


class Registry:
    """A named table of classes or functions, filled with the ``register`` decorator.

    Args:
        name: What the registry holds, used in error messages ("policy", ...).
        builtins: Module whose import registers the built-in entries; imported on
            the first lookup, so ``POLICIES.get("ppo")`` works without importing
            ``rlightning.policy`` first.
    """

    def __init__(self, name: str, builtins: Optional[str] = None) -> None:
        self.name = name
        self._items: Dict[str, Callable] = {}
        self._configs: Dict[str, type] = {}
        self._builtins = builtins

    def _load_builtins(self) -> None:
        if self._builtins is not None:
            module, self._builtins = self._builtins, None
            importlib.import_module(module)

    def register(
        self, name: Optional[str] = None, *, override: bool = False, config: Optional[type] = None
    ) -> Callable[[T], T]:
        """Decorator registering a class or function under ``name`` (default: its ``__name__``).

        Args:
            name: The registered name.
            override: Replace what is registered under ``name`` (a notebook cell run again).
            config: The config class that goes with the entry (policies: its `PolicyConfig` subclass,
                see `rlightning.utils.config.policy_config_class`).

        Raises:
            KeyError: the name is already registered (pass ``override=True`` to replace it,
                as a notebook cell that is run again does).
        """

        def deco(obj: T) -> T:
            key = name or obj.__name__
            if not isinstance(key, str) or not key:
                raise TypeError(f"{self.name} registry names must be non-empty strings, got {key!r}")
            if key in self._items and not override and self._items[key] is not obj:
                raise KeyError(
                    f"{self.name} {key!r} is already registered (by {self._items[key]!r}); "
                    "choose another name or pass override=True"
                )
            if config is not None and not isinstance(config, type):
                raise TypeError(f"{self.name} {key!r}: config must be a class, got {config!r}")
            self._items[key] = obj
            if config is None:
                self._configs.pop(key, None)
            else:
                self._configs[key] = config
            return obj

        return deco

    def get(self, name: str) -> Callable:
        """Return what is registered under ``name``.

        Raises:
            KeyError: unknown name; the message lists the registered names and the closest ones.
        """
        if name in self._items:
            return self._items[name]
        self._load_builtins()
        if name in self._items:
            return self._items[name]
        registered = sorted(self._items)
        near = closest(str(name), registered)
        hint = f" Did you mean {', '.join(repr(n) for n in near)}?" if near else ""
        raise KeyError(
            f"unknown {self.name} {name!r}.{hint} Registered {self.name} names: {', '.join(registered) or '(none)'}"
        )

    def config_of(self, name: str) -> Optional[type]:
        """The config class registered with ``name`` (None when it was registered without one)."""
        return self._configs.get(name)

    def names(self) -> List[str]:
        """Sorted registered names (built-ins included)."""
        self._load_builtins()
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        self._load_builtins()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.name!r}, {self.names()})"


BUFFERS = Registry("buffer", builtins="rlightning.buffer")
"""Data buffers by name (``buffer.type``): ``replay``, ``rollout``."""
ENVS = Registry("env", builtins="rlightning.env")
"""Env backends by name (``env.backend``): ``gymnasium``, ``pettingzoo`` and the other registered `BaseEnv` classes."""
POLICIES = Registry("policy", builtins="rlightning.policy")
"""Algorithms by name (``policy.type``), each with its config class."""
ENGINE = Registry("engine", builtins="rlightning.engine")
"""Engines by name (``engine``): ``syncrl``, ``asyncrl``, ``eval``."""
