"""PPO's values after the rollout: env workers act without the critic and value every observation at its end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from rlightning.env import EnvGroup
from rlightning.env.utils.episodes import EpisodeIds
from rlightning.env.utils.record_writer import RecordWriter
from rlightning.policy.algorithms.appo import IMPALAPolicy
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.utils.config import EnvConfig, PolicyConfig
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META

CFG = PolicyConfig(type="ppo", hidden_sizes=[16], deterministic_eval=True)


def _copy(meta, cfg=CFG, cls=PPOPolicy, role=PolicyRole.EVAL):
    torch.manual_seed(0)
    policy = cls(cfg, role)
    policy.setup(meta)
    return policy


@pytest.mark.parametrize("meta", [DISCRETE_META, CONTINUOUS_META], ids=["discrete", "continuous"])
def test_compute_values_are_the_values_compute_actions_gives(meta):
    policy = _copy(meta)
    assert policy.values_after_rollout
    obs = np.random.default_rng(0).standard_normal((2500,) + meta.observation_space.shape).astype(np.float32)
    want = policy.compute_actions(obs, deterministic=True)["value"]  # 2500 rows: more than one block
    got = policy.compute_values(obs)
    assert got.dtype == np.float32 and got.shape == (2500,)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    without = policy.compute_actions(obs[:7], deterministic=True, with_value=False)
    assert "value" not in without and without["action"].shape[0] == 7


def test_only_plain_ppo_eval_copies_value_after_the_rollout():
    assert not _copy(DISCRETE_META, role=PolicyRole.TRAIN).values_after_rollout  # the learner acts as it trains
    patched = _copy(DISCRETE_META)
    patched.compute_actions = lambda obs, deterministic=False: {"action": np.zeros(len(obs), dtype=np.int64)}
    assert not patched.values_after_rollout  # a replaced compute_actions may not take with_value
    impala = _copy(DISCRETE_META, PolicyConfig(type="impala", hidden_sizes=[16]), cls=IMPALAPolicy)
    assert not impala.values_after_rollout  # its own compute_actions, which values nothing: V-trace does
    obs = np.zeros((2, 4), dtype=np.float32)
    assert "value" not in impala.compute_actions(obs) and "policy_version" in impala.compute_actions(obs)
    assert impala.compute_actions(obs, with_value=True)["value"].shape == (2,)
    recurrent = _copy(DISCRETE_META, PolicyConfig(type="ppo", recurrent="gru", recurrent_size=8, hidden_sizes=[8]))
    assert not recurrent.values_after_rollout
    with pytest.raises(ValueError, match="recurrent policy's values depend on the state"):
        recurrent.compute_values(np.zeros((3, 4), dtype=np.float32))


def _one_worker(seed: int = 4):
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=4)])
    metas = g.init()
    g.attach_policy(PPOPolicy, CFG, metas[0], seed=0)
    g.reset(seed=seed)
    (worker,) = g.workers.values()
    return g, worker


def test_a_rollout_valued_at_its_end_stores_what_per_step_values_would(monkeypatch):
    g, worker = _one_worker()
    try:
        calls = []
        real = worker.policy.compute_values
        monkeypatch.setattr(worker.policy, "compute_values", lambda obs: calls.append(obs.shape) or real(obs))
        deferred = worker.collect(60).record  # CartPole episodes end inside 60 steps at random weights
        assert calls == [(4 * 61, 4)]  # one call: the 60 steps' observations and the last next.obs
        g.reset(seed=4)
        monkeypatch.setattr(PPOPolicy, "values_after_rollout", property(lambda self: False))
        per_step = worker.collect(60).record
    finally:
        g.close()
    assert deferred["next", "done"].any()
    assert torch.equal(deferred["action"], per_step["action"])
    assert torch.equal(deferred["next", "obs"], per_step["next", "obs"])
    for key in ("value", ("next", "value")):
        torch.testing.assert_close(deferred[key], per_step[key], rtol=1e-5, atol=1e-5)


def test_fill_values_writes_the_steps_taken_and_returns_the_bootstraps():
    rng = np.random.default_rng(1)
    obs = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(4)]
    writer = RecordWriter("e-0", 2, 5, obs[0], np.zeros(2, dtype=bool))
    for t in range(3):  # a rollout of 5 steps cut short after 3 (an env that raised)
        out = {"action": np.zeros(2, dtype=np.int64), "log_prob": np.zeros(2, dtype=np.float32)}
        writer.write_step(t, out, obs[t + 1], np.ones(2), np.zeros(2, bool), np.zeros(2, bool))

    def value_fn(x):
        return x.sum(axis=1)  # the value of an observation: the sum of its entries

    last = writer.fill_values(value_fn, 3)
    arrays = writer.finish(EpisodeIds(2), 3, last_value=last)
    sums = np.stack([o.sum(axis=1) for o in obs], axis=1)  # [N, 4]
    np.testing.assert_allclose(arrays["value"], sums[:, :3], rtol=1e-6)
    np.testing.assert_allclose(arrays["next_value"], sums[:, 1:], rtol=1e-6)
    with pytest.raises(ValueError, match=r"env e-0: the policy's compute_values returned 3 values for 8"):
        writer.fill_values(lambda x: np.zeros(3), 3)


def test_local_workers_in_lock_step_value_each_workers_rollout_at_its_end(monkeypatch):
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=3), EnvConfig(name="CartPole-v1", num_envs=2)])
    metas = g.init()
    try:
        g.attach_policy(PPOPolicy, CFG, metas[0], 0)
        w0, w1 = g.workers.values()
        g.load_policy_weights(w0.policy.get_weights(), 1)  # synced: the workers step together
        calls = {0: [], 1: []}
        for i, w in enumerate((w0, w1)):
            real = w.policy.compute_values
            monkeypatch.setattr(
                w.policy, "compute_values", lambda obs, _r=real, _i=i: calls[_i].append(len(obs)) or _r(obs)
            )
        g.reset(seed=2)
        together = dict(g.collect_rollouts(20))
        assert calls == {0: [3 * 21, 2 * 21], 1: []}  # worker 0's copy valued each worker's observations once
        g.reset(seed=2)
        monkeypatch.setattr(PPOPolicy, "values_after_rollout", property(lambda self: False))
        per_step = dict(g.collect_rollouts(20))  # a value per step (and the bootstrap), as before
    finally:
        g.close()
    for env_id in g.env_ids:
        a, b = together[env_id].record, per_step[env_id].record
        assert torch.equal(a["action"], b["action"])
        torch.testing.assert_close(a["value"], b["value"], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(a["next", "value"], b["next", "value"], rtol=1e-5, atol=1e-5)
