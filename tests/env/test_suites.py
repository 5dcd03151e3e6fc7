"""Env suites behind extras: a suite's id registers on demand, a missing package names its extra at once."""

from __future__ import annotations

import importlib
import importlib.util

import gymnasium as gym
import pytest

from rlightning.env import suites
from rlightning.env.gym_env import resolve_env_spec
from rlightning.env.suites import MissingSuiteError, check_suite_installed, ensure_suite


def _without(monkeypatch, missing: str):
    real_import, real_find = importlib.import_module, importlib.util.find_spec

    def fake_import(name, *args, **kwargs):
        if name == missing or name.startswith(missing + "."):
            raise ModuleNotFoundError(f"No module named {missing!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(suites.importlib, "import_module", fake_import)
    monkeypatch.setattr(suites.importlib.util, "find_spec", lambda n, *a: None if n == missing else real_find(n, *a))


@pytest.mark.parametrize(
    "env_id, missing, extra",
    [
        ("ALE/Breakout-v5", "ale_py", "atari"),
        ("MinAtar/Breakout-v1", "minatar", "minatar"),
        ("MiniGrid-Empty-8x8-v0", "minigrid", "minigrid"),
    ],
)
def test_a_missing_suite_package_names_its_extra(monkeypatch, env_id, missing, extra):
    if env_id in gym.registry:
        monkeypatch.delitem(gym.registry, env_id)
    _without(monkeypatch, missing)
    with pytest.raises(MissingSuiteError, match=rf'env {env_id!r} is from the .* pip install "rlightning\[{extra}\]"'):
        resolve_env_spec(env_id)


@pytest.mark.parametrize(
    "env_id, missing, extra", [("HalfCheetah-v5", "mujoco", "mujoco"), ("LunarLander-v3", "Box2D", "box2d")]
)
def test_registered_envs_whose_simulator_is_missing_fail_in_the_driver(monkeypatch, env_id, missing, extra):
    _without(monkeypatch, missing)
    with pytest.raises(MissingSuiteError, match=rf'pip install "rlightning\[{extra}\]"'):
        resolve_env_spec(env_id)


def test_a_suite_that_registers_through_a_function_is_registered(monkeypatch):
    calls = []

    class FakeModule:
        @staticmethod
        def register_envs():
            calls.append(1)
            gym.register(id="MinAtar/Fake-v1", entry_point="gymnasium.envs.classic_control:CartPoleEnv")

    real_import = importlib.import_module
    monkeypatch.setattr(
        suites.importlib, "import_module", lambda n, *a: FakeModule if n == "minatar.gym" else real_import(n, *a)
    )
    for key in [k for k in gym.registry if k.startswith("MinAtar/")]:
        monkeypatch.delitem(gym.registry, key)
    try:
        ensure_suite("MinAtar/Fake-v1")
        assert calls == [1] and "MinAtar/Fake-v1" in gym.registry
        ensure_suite("MinAtar/Fake-v1")  # registered now: nothing imported or registered again
        assert calls == [1]
    finally:
        gym.registry.pop("MinAtar/Fake-v1", None)


def test_other_ids_are_left_alone():
    ensure_suite("CartPole-v1")
    check_suite_installed(gym.spec("CartPole-v1"))
    with pytest.raises(KeyError, match="unknown env id 'CartPol-v1'"):
        resolve_env_spec("CartPol-v1")
