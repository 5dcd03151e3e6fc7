"""Runs with different placements built in one process do not affect each other (Ray actors)."""

import os

import pytest

from rlightning.buffer.builder import build_data_buffer
from rlightning.env.env_group import EnvGroup
from rlightning.policy.builder import build_policy_group
from rlightning.utils.builders import build_run
from rlightning.utils.config import BufferConfig, ClusterConfig, EnvConfig, PolicyConfig
from rlightning.utils.utils import InternalFlag
from tests.support.configs import small_ppo

pytestmark = pytest.mark.ray

FLAG_VARS = [f"RLIGHTNING_{n}" for n in InternalFlag.NAMES]
REMOTE_ENV_AND_STORAGE = [
    "cluster.inference=eval_workers",  # an eval worker acts (the preset's env workers would act themselves)
    "cluster.remote_env=true",
    "cluster.remote_storage=true",
    "cluster.remote_eval=true",
    "env.num_cpus=0.25",
    "cluster.eval_each_cpu_num=0.25",
    "cluster.buffer_each_cpu_num=0.25",
]


@pytest.fixture
def flags(monkeypatch):
    """The RLIGHTNING_* variables, isolated: all "0" (local) for the test, restored afterwards."""
    for var in FLAG_VARS:
        monkeypatch.setenv(var, "0")
    return monkeypatch


def _actor_env(actor) -> dict:
    """The RLIGHTNING_* variables inside a Ray actor's process."""
    import ray

    return ray.get(actor.__ray_call__.remote(lambda self: {v: os.environ.get(v) for v in FLAG_VARS}), timeout=60)


def _step(parts) -> int:
    """One engine iteration; the env steps it took (the metric counts the run's total)."""
    before = parts.engine.env_steps
    return parts.engine.step()["env_steps"] - before


def _policy_locality(group) -> tuple:
    return [w.is_remote for w in group.train_workers], [w.is_remote for w in group.eval_workers]


def test_two_runs_with_different_placements_do_not_affect_each_other(tmp_path, ray_runtime, flags):
    before = {v: os.environ.get(v) for v in FLAG_VARS}
    remote = build_run(small_ppo(tmp_path / "remote", False, *REMOTE_ENV_AND_STORAGE))
    local = build_run(small_ppo(tmp_path / "local", False, "cluster.inference=eval_workers"))
    try:
        for parts in (remote, local):
            assert _step(parts) == 256
        assert _step(remote) == 256  # the local run built in between changed nothing
        assert remote.env_group.is_remote is True and local.env_group.is_remote is False
        assert remote.buffer.is_remote is True and local.buffer.is_remote is False
        assert _policy_locality(remote.policy_group) == ([False], [True])
        assert _policy_locality(local.policy_group) == ([False], [False])
        # the remote run's actors got the run's placement, not this process's flags (all "0")
        env_actor = next(iter(remote.env_group.workers.values()))
        assert _actor_env(env_actor)["RLIGHTNING_REMOTE_ENV"] == "1"
        assert _actor_env(env_actor)["RLIGHTNING_REMOTE_STORAGE"] == "1"
        assert _actor_env(env_actor)["RLIGHTNING_REMOTE_TRAIN"] == "0"
        assert _actor_env(remote.policy_group.eval_workers[0].worker)["RLIGHTNING_REMOTE_EVAL"] == "1"
        assert {v: os.environ.get(v) for v in FLAG_VARS} == before  # nothing flipped the process's flags

        # the engine's eval env group is local while the training env group stays remote
        result = remote.engine.evaluate(num_episodes=1)
        assert result["episodes"] == 1
        assert remote.engine.evaluator.env_group.is_remote is False  # the eval group evaluate() made
        assert remote.env_group.is_remote is True
        assert _step(remote) == 256 and _step(local) == 256
        assert {v: os.environ.get(v) for v in FLAG_VARS} == before
    finally:
        remote.engine.close()
        local.engine.close()


def test_seed_calls_without_placement_follow_internal_flag(ray_runtime, flags):
    cfg = EnvConfig(name="CartPole-v1", num_envs=2, num_cpus=0.25)
    group = EnvGroup([cfg, cfg])
    flags.setenv("RLIGHTNING_REMOTE_ENV", "1")  # set after the group was made: read when init() runs
    flags.setenv("RLIGHTNING_REMOTE_STORAGE", "1")
    metas = group.init()
    buffer = build_data_buffer("replay", BufferConfig(capacity=64, seed=0))
    flags.setenv("RLIGHTNING_REMOTE_EVAL", "1")
    policies = build_policy_group("ppo", PolicyConfig(), ClusterConfig(eval_each_cpu_num=0.25), backend="gloo")
    try:
        assert group.is_remote is True
        assert _actor_env(group.workers[group.env_ids[0]])["RLIGHTNING_REMOTE_ENV"] == "1"
        buffer.init(metas, num_storages=2, storage_options={"num_cpus": 0.25})
        assert buffer.is_remote is True
        assert _policy_locality(policies) == ([False], [True])
        policies.construct_network(metas[0], seed=0)
        rets = group.reset(seed=0)
        resps = policies.rollout_batch(rets)
        buffer.add_batched_transition(rets, resps)
        assert set(group.step(resps).ids()) == set(group.env_ids)
    finally:
        policies.shutdown()
        buffer.close()
        group.close()
