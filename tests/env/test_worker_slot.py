"""Tests of rlightning/env/worker_slot.py: env class resolution and slot building."""

import pytest

from rlightning.env import GymnasiumEnv, RendezvousEnv
from rlightning.env.worker_slot import build_slots, is_actor_death, resolve_env_class
from rlightning.utils.config import EnvConfig
from rlightning.utils.registry import ENVS


def test_resolve_env_class_by_backend_name_or_default():
    assert resolve_env_class(EnvConfig()) is GymnasiumEnv
    assert resolve_env_class(EnvConfig(name="rendezvous")) is RendezvousEnv
    assert resolve_env_class(EnvConfig(name="anything", backend="rendezvous")) is RendezvousEnv


def test_resolve_env_class_errors():
    with pytest.raises(KeyError, match=r"unknown env 'rendezvus'\. Did you mean 'rendezvous'\?"):
        resolve_env_class(EnvConfig(backend="rendezvus"))
    ENVS.register("not_an_env", override=True)(dict)
    try:
        with pytest.raises(TypeError, match=r"env backend 'not_an_env' is registered in ENVS as <class 'dict'>"):
            resolve_env_class(EnvConfig(backend="not_an_env"))
    finally:
        ENVS._items.pop("not_an_env", None)


def test_slots_get_global_indices_and_seed_offsets():
    slots = build_slots([EnvConfig(num_envs=2), EnvConfig(num_envs=3), EnvConfig(name="rendezvous", num_envs=1)])
    assert [s.env_id for s in slots] == ["CartPole-v1-0", "CartPole-v1-1", "rendezvous-2"]
    assert [s.seed_offset for s in slots] == [0, 2, 5]
    assert [s.num_envs for s in slots] == [2, 3, 1]
    assert all(s.handle is None for s in slots)


def test_local_launch_and_stop():
    (slot,) = build_slots(EnvConfig(num_envs=2))
    slot.prepare()
    assert "env_spec" in slot.extra_kwargs
    handle = slot.launch(remote=False)
    assert not handle.is_remote and isinstance(handle.worker.env, GymnasiumEnv)  # a RolloutWorker around it
    slot.stop()
    assert slot.handle is None


def test_is_actor_death():
    from ray.exceptions import ActorDiedError, RayTaskError

    assert is_actor_death(ActorDiedError())
    assert not is_actor_death(ValueError("bad action"))
    assert not is_actor_death(RayTaskError("f", "tb", ValueError("x")))
