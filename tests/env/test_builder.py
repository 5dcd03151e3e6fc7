"""Tests of rlightning/env/builder.py: define_env_instance_cfgs and build_env_group (seed 004)."""

import inspect

import pytest

from rlightning.env import EnvGroup, default_env_preprocess_fn
from rlightning.env.builder import build_env_group, define_env_instance_cfgs
from rlightning.utils.config import EnvConfig


def test_signatures_match_the_seed():
    sig = inspect.signature(define_env_instance_cfgs)
    assert list(sig.parameters) == ["env_cfg", "num_workers"] and sig.parameters["num_workers"].default == 1
    sig = inspect.signature(build_env_group)
    # the seed's parameters, in order; the placement arguments added after them are keyword-only
    assert [n for n, p in sig.parameters.items() if p.kind is not p.KEYWORD_ONLY] == ["env_cfgs", "preprocess_fn"]
    assert sig.parameters["preprocess_fn"].default is default_env_preprocess_fn


def test_define_env_instance_cfgs_makes_independent_copies():
    base = EnvConfig(name="CartPole-v1", num_envs=4)
    cfgs = define_env_instance_cfgs(base, num_workers=3)
    assert len(cfgs) == 3 and all(c == base for c in cfgs)
    assert all(c is not base for c in cfgs)
    cfgs[0].num_envs = 8
    assert base.num_envs == 4 and cfgs[1].num_envs == 4


def test_define_env_instance_cfgs_errors():
    with pytest.raises(ValueError, match=r"num_workers must be an int >= 1 \(env workers to build\), got 0"):
        define_env_instance_cfgs(EnvConfig(), num_workers=0)
    with pytest.raises(TypeError, match=r"env_cfg must be an EnvConfig, got dict"):
        define_env_instance_cfgs({"name": "CartPole-v1"})


def test_num_workers_below_one_is_rejected_by_the_config():
    with pytest.raises(ValueError, match=r"num_workers"):
        EnvConfig(num_workers=0)


def test_build_env_group_expands_workers_over_configs():
    def pre(resp):
        return resp.action

    group = build_env_group(
        [EnvConfig(num_workers=2), EnvConfig(name="rendezvous", num_workers=1)], preprocess_fn=[pre, None]
    )
    assert isinstance(group, EnvGroup) and not group.is_initialized
    assert group.env_ids == ["CartPole-v1-0", "CartPole-v1-1", "rendezvous-2"]
    single = build_env_group(EnvConfig(num_envs=3))
    assert single.env_ids == ["CartPole-v1-0"] and single.num_envs == 3


def test_build_env_group_errors():
    with pytest.raises(ValueError, match=r"preprocess_fn has 2 functions for 1 env configs"):
        build_env_group([EnvConfig()], preprocess_fn=[None, None])
    with pytest.raises(ValueError, match=r"env_cfgs must be an EnvConfig or a non-empty list of them, got \[\]"):
        build_env_group([])
    with pytest.raises(TypeError, match=r"env_cfgs must hold EnvConfig objects, got str"):
        build_env_group(["CartPole-v1"])
