"""Env suites behind optional extras: Atari, MinAtar, MiniGrid, MuJoCo, Box2D, with their install hints.

An env id of a suite (``ALE/Breakout-v5``, ``MinAtar/Breakout-v1``,
``MiniGrid-Empty-8x8-v0``, ``HalfCheetah-v5``, ``LunarLander-v3``) works once the
suite's package is installed: `ensure_suite` imports the package that registers
the ids, and a missing package fails at once, in the driver, with the extra to
install (``pip install "rlightning[atari]"``), not later inside a worker.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import dataclass
from typing import Optional, Tuple

import gymnasium as gym

__all__ = ["SUITES", "MissingSuiteError", "Suite", "check_suite_installed", "ensure_suite"]


class MissingSuiteError(ImportError):
    """An env of a suite whose package is not installed; the message names the extra to install."""


@dataclass(frozen=True)
class Suite:
    """One env suite: how its ids look, which module registers or runs them, and its extra."""

    name: str
    extra: str
    module: str  # imported to register the ids (id_prefixes) or needed to run them (entry_prefixes)
    package: str  # what pip installs
    id_prefixes: Tuple[str, ...] = ()
    entry_prefixes: Tuple[str, ...] = ()
    register: Optional[str] = None  # a function of ``module`` that registers the ids, if importing does not

    def hint(self, env_id: str) -> str:
        return (
            f"env {env_id!r} is from the {self.name} suite, which needs {self.package}: "
            f'pip install "rlightning[{self.extra}]"'
        )


SUITES: Tuple[Suite, ...] = (
    Suite("Atari", "atari", "ale_py", "ale-py (its ROMs ship in the package)", id_prefixes=("ALE/",)),
    Suite("MinAtar", "minatar", "minatar.gym", "minatar", id_prefixes=("MinAtar/",), register="register_envs"),
    Suite("MiniGrid", "minigrid", "minigrid", "minigrid", id_prefixes=("MiniGrid-", "BabyAI-")),
    Suite("MuJoCo", "mujoco", "mujoco", "mujoco", entry_prefixes=("gymnasium.envs.mujoco",)),
    Suite("Box2D", "box2d", "Box2D", "box2d", entry_prefixes=("gymnasium.envs.box2d",)),
)


def ensure_suite(env_id: str) -> None:
    """Register the ids of the suite ``env_id`` belongs to (importing its package), if it is not registered yet.

    Raises:
        MissingSuiteError: the suite's package is not installed (the message names the extra).
    """
    if not isinstance(env_id, str) or env_id in gym.registry:
        return
    for suite in SUITES:
        if not env_id.startswith(suite.id_prefixes) or not suite.id_prefixes:
            continue
        try:
            module = importlib.import_module(suite.module)
        except ImportError as err:
            raise MissingSuiteError(f"{suite.hint(env_id)} ({err})") from None
        if suite.register and env_id not in gym.registry:
            registered = {k for k in gym.registry if k.startswith(suite.id_prefixes)}
            if not registered:
                getattr(module, suite.register)()
        return


def check_suite_installed(spec: gym.envs.registration.EnvSpec) -> None:
    """Fail now when the registered env ``spec`` needs a suite package that is missing (MuJoCo, Box2D).

    Raises:
        MissingSuiteError: the package its entry point needs is not installed.
    """
    entry = spec.entry_point if isinstance(spec.entry_point, str) else ""
    for suite in SUITES:
        if suite.entry_prefixes and entry.startswith(suite.entry_prefixes):
            if importlib.util.find_spec(suite.module) is None:
                raise MissingSuiteError(suite.hint(spec.id))
            return
