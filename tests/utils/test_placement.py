"""`Placement`: a run's choice of which components are Ray actors, passed down instead of flipped in flags."""

import inspect
import os

import pytest

from rlightning.buffer.builder import build_data_buffer
from rlightning.env.builder import build_env_group
from rlightning.env.env_group import EnvGroup
from rlightning.policy.builder import build_policy_group, check_gpu_request
from rlightning.utils.builders import build_run
from rlightning.utils.config import BufferConfig, ClusterConfig, EnvConfig, PolicyConfig
from rlightning.utils.placement import Placement, resolve_placement, with_env_vars
from rlightning.utils.utils import InternalFlag
from tests.support.configs import small_ppo

FLAG_VARS = [f"RLIGHTNING_{n}" for n in InternalFlag.NAMES]


@pytest.fixture
def flags(monkeypatch):
    """The RLIGHTNING_* variables, isolated: unset at the start, restored afterwards."""
    for var in FLAG_VARS:
        monkeypatch.setenv(var, "0")
        monkeypatch.delenv(var)
    return monkeypatch


def _flag_env():
    return {var: os.environ.get(var) for var in FLAG_VARS}


def test_from_cluster_config_and_from_flags(flags):
    p = Placement.from_cluster_config(ClusterConfig(remote_env=True, remote_storage=True))
    assert p == Placement(remote_env=True, remote_storage=True)
    assert not p.remote_eval and not p.remote_train
    assert Placement.from_flags() == Placement()
    flags.setenv("RLIGHTNING_REMOTE_EVAL", "1")
    assert Placement.from_flags() == Placement(remote_eval=True)


def test_a_placement_is_a_frozen_checked_value():
    p = Placement(remote_env=True)
    with pytest.raises(AttributeError):
        p.remote_env = False
    with pytest.raises(TypeError, match=r"Placement.remote_train must be a bool \(True: Ray actors.*got 'yes'"):
        Placement(remote_train="yes")
    with pytest.raises(KeyError, match="Placement has no field 'remote_gpu'; fields: remote_env, remote_eval"):
        p.replace(remote_gpu=True)
    with pytest.raises(TypeError, match="Placement.remote_eval must be a bool"):
        p.replace(remote_eval=1)
    assert p.replace(remote_env=False) == Placement() and p.remote_env  # a copy
    with pytest.raises(KeyError, match="unknown component 'gpu'; components: env, eval, train, storage"):
        p.is_remote("gpu")
    with pytest.raises(TypeError, match="cluster_cfg must be a ClusterConfig, got dict"):
        Placement.from_cluster_config({"remote_env": True})


def test_env_vars_carry_the_placement_not_the_process_flags(flags):
    flags.setenv("RLIGHTNING_REMOTE_ENV", "1")
    flags.setenv("RLIGHTNING_DEBUG", "1")
    env = Placement(remote_storage=True).env_vars()
    assert env["RLIGHTNING_REMOTE_ENV"] == "0" and env["RLIGHTNING_REMOTE_STORAGE"] == "1"
    assert env["RLIGHTNING_DEBUG"] == "1"  # the process's other flags travel along
    assert set(env) == set(FLAG_VARS)
    opts = with_env_vars({"num_cpus": 1, "runtime_env": {"env_vars": {"RLIGHTNING_DEBUG": "0", "X": "y"}}}, env)
    assert opts["num_cpus"] == 1
    assert opts["runtime_env"]["env_vars"]["RLIGHTNING_DEBUG"] == "0"  # the caller's explicit variable wins
    assert opts["runtime_env"]["env_vars"]["X"] == "y"
    assert opts["runtime_env"]["env_vars"]["RLIGHTNING_REMOTE_STORAGE"] == "1"


def test_resolve_placement_prefers_the_specific_argument(flags):
    flags.setenv("RLIGHTNING_REMOTE_ENV", "1")
    assert resolve_placement("env").remote_env is True  # nothing given: as InternalFlag says
    assert resolve_placement("env", remote=False).remote_env is False
    assert resolve_placement("env", placement=Placement()).remote_env is False
    assert resolve_placement("env", True, Placement(remote_storage=True)) == Placement(True, False, False, True)
    with pytest.raises(TypeError, match=r"remote must be True \(Ray actors\), False .* or None .*got 'no'"):
        resolve_placement("env", remote="no")
    with pytest.raises(TypeError, match="placement must be a Placement"):
        resolve_placement("storage", placement=ClusterConfig())


def test_builders_reject_bad_placement_arguments_at_once():
    with pytest.raises(TypeError, match="remote must be True"):
        EnvGroup([EnvConfig()], remote=1)
    with pytest.raises(TypeError, match="placement must be a Placement"):
        build_env_group(EnvConfig(), placement={"remote_env": True})
    with pytest.raises(TypeError, match="remote must be True"):
        build_data_buffer("replay", BufferConfig(), remote="yes")
    with pytest.raises(TypeError, match="placement must be a Placement"):
        build_policy_group("ppo", PolicyConfig(), ClusterConfig(), placement=ClusterConfig())


def test_explicit_local_placement_wins_over_flags_that_say_remote(flags):
    """Flags saying "remote" do not reach components built with an explicit local placement (no Ray needed)."""
    InternalFlag.set(REMOTE_ENV=True, REMOTE_EVAL=True, REMOTE_TRAIN=True, REMOTE_STORAGE=True)
    group = build_env_group(EnvConfig(num_envs=2), remote=False)
    metas = group.init()
    try:
        assert group.is_remote is False
        buffer = build_data_buffer("replay", BufferConfig(capacity=64), placement=Placement())
        buffer.init(metas)
        assert buffer.is_remote is False
        policies = build_policy_group("ppo", PolicyConfig(), ClusterConfig(), placement=Placement())
        assert [w.is_remote for w in policies.train_workers + policies.eval_workers] == [False, False]
        policies.shutdown()
        buffer.close()
    finally:
        group.close()
    assert check_gpu_request(ClusterConfig(), Placement())["asked_remote"] == 0.0


def test_build_run_neither_reads_nor_changes_the_flags(tmp_path, flags):
    InternalFlag.set(REMOTE_ENV=True, REMOTE_STORAGE=True)  # what seed code left behind; the config says local
    before = _flag_env()
    parts = build_run(small_ppo(tmp_path))
    try:
        assert _flag_env() == before
        m = parts.engine.step()
        assert m["env_steps"] == 256
        assert parts.env_group.is_remote is False and parts.buffer.is_remote is False
        assert not any(w.is_remote for w in parts.policy_group.train_workers + parts.policy_group.eval_workers)
        assert _flag_env() == before
    finally:
        parts.engine.close()


def test_seed_calls_without_placement_follow_internal_flag_locally(flags):
    flags.setenv("RLIGHTNING_REMOTE_ENV", "0")
    group = EnvGroup([EnvConfig(num_envs=1)])
    metas = group.init()
    try:
        assert group.is_remote is False
        buffer = build_data_buffer("replay", BufferConfig(capacity=16))
        buffer.init(metas)
        assert buffer.is_remote is False
        buffer.close()
    finally:
        group.close()


@pytest.mark.parametrize(
    "fn, seed_params",
    [
        (build_env_group, ["env_cfgs", "preprocess_fn"]),
        (EnvGroup.__init__, ["self", "env_cfg_list", "preprocess_fn"]),
        (build_policy_group, ["policy_cls", "policy_cfg", "cluster_cfg", "backend", "is_colocated"]),
    ],
)
def test_seed_signatures_keep_their_parameters_and_add_keyword_only_placement(fn, seed_params):
    params = inspect.signature(fn).parameters
    assert [n for n, p in params.items() if p.kind is not p.KEYWORD_ONLY] == seed_params
    added = {n: p for n, p in params.items() if p.kind is p.KEYWORD_ONLY}
    assert set(added) <= {"remote", "placement"} and "placement" in added
    assert all(p.default is None for p in added.values())


def test_data_buffer_placement_arguments_are_keyword_only_with_none_defaults():
    from rlightning.buffer.data_buffer import DataBuffer

    for fn in (build_data_buffer, DataBuffer.__init__):
        added = {n: p for n, p in inspect.signature(fn).parameters.items() if p.kind is p.KEYWORD_ONLY}
        assert list(added) == ["remote", "placement"] and all(p.default is None for p in added.values())
