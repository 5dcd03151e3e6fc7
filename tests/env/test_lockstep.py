"""Local env workers stepped in lock step (one forward pass per step for all of them, `rlightning.env.rollout_loop`):
what they store, and what happens when one's env raises."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import rlightning.env.env_group as env_group_module
from rlightning.env import EnvGroup
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.utils.config import EnvConfig, PolicyConfig
from tests.support.configs import small_ppo

FLAKY = "tests.support.env_flaky:Flaky-v0"  # importing the module registers Flaky-v0


def _count_lockstep(monkeypatch, enabled: bool = True) -> list:
    """Count the group's lock-step collections; ``enabled=False`` makes every worker collect on its own."""
    calls = []
    real = env_group_module.collect_local
    monkeypatch.setattr(env_group_module, "collect_local", lambda *a: calls.append(1) or real(*a))
    if not enabled:
        monkeypatch.setattr(env_group_module, "can_step_together", lambda workers: False)
    return calls


def _stored(build, tmp_path, *extra):
    engine = build(small_ppo(tmp_path, False, "env.num_workers=3", "env.num_envs=3", "seed=5", *extra)).engine
    engine.rollout()
    engine.rollout()  # a second rollout: episodes in flight continue from the first
    return engine.buffer.get_data()


@pytest.mark.parametrize("deterministic", [True, False])
def test_lockstep_stores_what_the_workers_alone_store(tmp_path, build, monkeypatch, deterministic):
    extra = ("policy.deterministic_eval=true",) if deterministic else ()
    together = _count_lockstep(monkeypatch)
    a = _stored(build, tmp_path / "a", *extra)
    assert len(together) == 2  # both rollouts collected in lock step
    b = _stored(build, tmp_path / "b", *extra)  # the same seed again: the same data, exactly
    assert set(a.keys(True, True)) == set(b.keys(True, True)) and a.batch_size == b.batch_size
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key
    if not deterministic:
        # Sampled actions come from one draw over all rows in lock step, from one draw per worker alone:
        # the same distribution, other draws (the copies share this process's RNG).
        return
    monkeypatch.undo()
    alone = _count_lockstep(monkeypatch, enabled=False)
    c = _stored(build, tmp_path / "c", *extra)
    assert alone == [] and set(c.keys(True, True)) == set(a.keys(True, True)) and c.batch_size == a.batch_size
    computed = ("log_prob", "value", "next_value", "advantage", "return")
    for key in a.keys(True, True):
        if key in computed:  # a forward pass over 9 rows or 3 x 3 rows: equal up to the matmul's rounding
            torch.testing.assert_close(a[key], c[key])
        else:  # actions, observations, rewards, flags, episode ids: exactly
            assert torch.equal(a[key], c[key]), key
    assert {"log_prob", "value", "advantage"} <= set(a.keys(True, True))


SPACE_ENV = "tests.support.space_envs:SpaceEnv"


@pytest.mark.parametrize(
    "kwargs", ["{obs: box, act: discrete_start, mask: true}", "{obs: nested_dict, act: discrete_start}"]
)
def test_dict_observations_step_in_lockstep_and_store_what_workers_alone_store(tmp_path, build, monkeypatch, kwargs):
    """Dict observations (a masked one, a nested one) share one forward pass per step too: concatenated key by
    key, each worker's rows answered under its own mask, the same record as each worker acting alone."""
    extra = (f"env.name={SPACE_ENV}", f"env.env_kwargs={kwargs}", "policy.deterministic_eval=true")
    together = _count_lockstep(monkeypatch)
    a = _stored(build, tmp_path / "a", *extra)
    assert len(together) == 2
    monkeypatch.undo()
    alone = _count_lockstep(monkeypatch, enabled=False)
    c = _stored(build, tmp_path / "c", *extra)
    assert alone == [] and set(c.keys(True, True)) == set(a.keys(True, True)) and c.batch_size == a.batch_size
    assert any(k.startswith("obs.") for k in a.keys(True, True))  # the observation is stored key by key
    computed = ("log_prob", "value", "next_value", "advantage", "return")
    for key in a.keys(True, True):
        if key in computed:
            torch.testing.assert_close(a[key], c[key])
        else:
            assert torch.equal(a[key], c[key]), key
    if "mask: true" in kwargs:  # SpaceEnv raises on a masked action: none was taken in either run
        assert "obs.action_mask" in set(a.keys(True, True))


def _synced_group(configs):
    group = EnvGroup(configs)
    metas = group.init()
    cfg = PolicyConfig(type="ppo", hidden_sizes=[8])
    group.attach_policy(PPOPolicy, cfg, metas[0], seed=0)
    train = PPOPolicy(cfg, PolicyRole.TRAIN)
    train.setup(metas[0], 3)
    group.load_policy_weights(train.get_weights(), weight_version=1)  # synced copies: lock step
    return group


def test_an_env_that_raises_in_lockstep_ends_its_rollout_only_and_is_recreated(tmp_path, monkeypatch):
    calls = _count_lockstep(monkeypatch)
    log = str(tmp_path / "raises.log")
    group = _synced_group(
        [
            EnvConfig(name=FLAKY, num_envs=2, env_kwargs={"fail_every": 4, "log_path": log}),
            EnvConfig(name=FLAKY, num_envs=3, env_kwargs={"log_path": log}),
        ]
    )
    try:
        flaky, steady = group.env_ids
        group.reset(seed=0)
        results = dict(group.collect_rollouts(num_steps=6))
        assert calls == [1]
        cut = results[flaky]
        assert cut.num_steps == 3 and isinstance(cut.error, RuntimeError)  # the 4th step call raised
        assert "simulator crashed at step call 4" in str(cut.error)
        assert cut.record["obs"][0, :, 0].tolist() == [0.0, 1.0, 2.0]  # the steps before it are kept
        np.testing.assert_array_equal(group.workers[flaky].current_env_ret.observation[:, 0], [0.0, 0.0])
        # The other worker went on alone after the error: all six steps (the sixth is the autoreset step).
        assert results[steady].num_steps == 6 and results[steady].error is None
        assert results[steady].record["obs"][0, :, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
        assert group.pop_restarted_env_ids() == [flaky] and group.stats()["env_errors"][flaky] == 1
        assert group.stats()["env_steps"] == 3 * 2 + 6 * 3
        again = dict(group.collect_rollouts(2))  # the recreated worker steps in lock step again
        assert calls == [1, 1]
        assert again[flaky].num_steps == 2 and again[flaky].record["obs"][:, 0, 0].tolist() == [0.0, 0.0]
        assert again[steady].num_steps == 2 and again[steady].error is None
    finally:
        group.close()
