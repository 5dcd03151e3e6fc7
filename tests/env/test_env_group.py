"""Tests of rlightning/env/env_group.py with local workers (the Ray ones are in test_env_group_ray.py)."""

import numpy as np
import pytest

import tests.support.env_fixed  # noqa: F401 - registers FixedLength-v0
from rlightning.env import EnvGroup, GymnasiumEnv, RolloutWorker
from rlightning.types import BatchedData, EnvRet, MultiAgentPolicyResponse, PolicyResponse
from rlightning.utils.config import EnvConfig


def _fixed(num_envs=2, **kw):
    return EnvConfig(name="FixedLength-v0", num_envs=num_envs, env_kwargs={"episode_length": 2}, **kw)


def _resps(env_rets, action_fn=lambda n: np.zeros(n, dtype=np.int64)):
    return BatchedData(
        list(env_rets.ids()), [PolicyResponse(i, action=action_fn(r.observation.shape[0])) for i, r in env_rets.items()]
    )


@pytest.fixture
def group():
    g = EnvGroup([_fixed(2), _fixed(2), _fixed(3)])
    g.init()
    yield g
    g.close()


def test_constructor_builds_nothing(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("no worker may be built before init()")

    monkeypatch.setattr(GymnasiumEnv, "__init__", boom)
    g = EnvGroup([_fixed(), _fixed()])
    assert g.env_ids == ["FixedLength-v0-0", "FixedLength-v0-1"]
    assert g.num_envs == 4 and g.num_workers == 2 and not g.is_initialized and g.workers == {}
    assert g.stats()["initialized"] is False


def test_init_returns_metas_with_global_indices(group):
    metas = group.init()  # idempotent
    assert [m.env_id for m in metas] == ["FixedLength-v0-0", "FixedLength-v0-1", "FixedLength-v0-2"]
    assert [m.num_envs for m in metas] == [2, 2, 3]
    assert group.env_metas == metas and not group.is_remote
    # Each worker is a RolloutWorker holding its env.
    assert all(isinstance(w, RolloutWorker) and isinstance(w.env, GymnasiumEnv) for w in group.workers.values())


def test_reset_seeds_each_worker_after_the_sub_envs_before_it(group):
    rets = group.reset(seed=100)
    assert list(rets.ids()) == group.env_ids
    u = np.concatenate([r.observation[:, 1] for r in rets.values()])
    assert len(set(u.tolist())) == 7  # every sub-env its own seed
    # Worker 2 (after 4 sub-envs) is seeded with 104: the same as a lone worker seeded with 104.
    lone = GymnasiumEnv(_fixed(3, vectorization_mode="sync")).reset(seed=104).observation
    np.testing.assert_array_equal(rets[2][1].observation, lone)
    np.testing.assert_array_equal(group.reset(seed=100)[0][1].observation, rets[0][1].observation)


def test_step_keeps_order_and_accepts_subsets(group):
    rets = group.reset(seed=0)
    order = BatchedData(
        ["FixedLength-v0-2", "FixedLength-v0-0"],
        [
            PolicyResponse("FixedLength-v0-2", action=np.array([2, 2, 2])),
            PolicyResponse("FixedLength-v0-0", action=np.array([1, 0])),
        ],
    )
    out = group.step(order)
    assert list(out.ids()) == ["FixedLength-v0-2", "FixedLength-v0-0"]
    assert out[0][1].last_reward.tolist() == [3.0, 3.0, 3.0] and out[1][1].last_reward.tolist() == [2.0, 1.0]
    assert all(isinstance(r, EnvRet) for r in out.values())
    assert group.stats()["env_steps"] == 5
    assert rets is not out


def test_episodes_and_steps_in_stats(group):
    rets = group.reset(seed=0)
    for _ in range(5):
        rets = group.step(_resps(rets))
    st = group.stats()
    assert st["env_steps"] == 5 * 7
    # Episodes of 2 steps, NEXT_STEP autoreset: done on steps 2 and 5 -> 2 episodes per sub-env, return 2.0.
    assert st["episodes"] == 14 and set(st["recent_returns"]) == {2.0} and set(st["recent_lengths"]) == {2}
    assert st["mean_return"] == 2.0 and st["total_restarts"] == 0 and st["restarts"]["FixedLength-v0-1"] == 0
    assert st["env_steps_per_s"] > 0 and st["in_flight"] == 0


def test_step_input_errors(group):
    rets = group.reset(seed=0)
    with pytest.raises(TypeError, match=r"policy_resps must be a BatchedData of env id -> PolicyResponse, got list"):
        group.step([PolicyResponse("FixedLength-v0-0", action=np.zeros(2))])
    with pytest.raises(
        KeyError,
        match=r"unknown env id 'FixedLength-v0-9'\. Did you mean 'FixedLength-v0-\d'\?.*env ids: FixedLength-v0-0, ",
    ):
        group.step(BatchedData(["FixedLength-v0-9"], [PolicyResponse("FixedLength-v0-9", action=np.zeros(2))]))
    with pytest.raises(KeyError, match=r"unknown env id 7\. .*This group's env ids: FixedLength-v0-0"):
        group.step(BatchedData([7], [PolicyResponse("FixedLength-v0-0", action=np.zeros(2))]))
    resp = PolicyResponse("FixedLength-v0-0", action=np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match=r"names env ids \['FixedLength-v0-0'\] more than once"):
        group.step(BatchedData(["FixedLength-v0-0", "FixedLength-v0-0"], [resp, resp]))
    bad = BatchedData(["FixedLength-v0-1"], [PolicyResponse("FixedLength-v0-1", action=np.array([0, 7]))])
    with pytest.raises(
        ValueError, match=r"env FixedLength-v0-1: action 7 \(sub-env 1\) is outside the action space Discrete\(3\)"
    ):
        group.step(bad)
    assert len(group.step(_resps(rets))) == 3  # the group still works


def test_calls_before_init_are_errors():
    g = EnvGroup([_fixed()])
    with pytest.raises(RuntimeError, match=r"the EnvGroup is not initialised: call init\(\) first"):
        g.reset()
    with pytest.raises(RuntimeError, match=r"not initialised"):
        g.step(BatchedData([], []))


def test_step_async_and_collect_async_locally(group):
    rets = group.reset(seed=0)
    assert len(group.collect_async()) == 0  # nothing in flight
    group.step_async(_resps(rets))
    assert group.stats()["in_flight"] == 3
    with pytest.raises(ValueError, match=r"env FixedLength-v0-0 already has a step in flight; collect_async\(\) it"):
        group.step(_resps(BatchedData([rets[0][0]], [rets[0][1]])))
    out = group.collect_async(timeout=1.0, min_ready=2)
    assert sorted(out.ids()) == sorted(group.env_ids)
    assert group.stats()["in_flight"] == 0 and group.stats()["env_steps"] == 7
    with pytest.raises(ValueError, match=r"min_ready must be an int >= 1, got 0"):
        group.collect_async(min_ready=0)
    with pytest.raises(ValueError, match=r"timeout must be None or a number of seconds >= 0, got -1"):
        group.collect_async(timeout=-1)


def test_auto_reset_context_resets_and_settles(group):
    with group.auto_reset(seed=5) as rets:
        assert [r.info["episode_length"].tolist() for r in rets.values()] == [[0, 0], [0, 0], [0, 0, 0]]
        group.step_async(_resps(rets))
    assert group.stats()["in_flight"] == 0
    fresh = EnvGroup([_fixed()])
    with fresh.auto_reset(seed=1) as rets:  # initialises a fresh group
        assert fresh.is_initialized and len(rets) == 1
    fresh.close()


def test_per_worker_preprocess_functions():
    g = EnvGroup([_fixed(), _fixed()], preprocess_fn=[None, lambda resp: resp.choice + 1])
    g.init()
    g.reset(seed=0)
    out = g.step(
        BatchedData(
            g.env_ids,
            [
                PolicyResponse(g.env_ids[0], action=np.array([0, 0])),
                PolicyResponse(g.env_ids[1], choice=np.array([0, 1])),
            ],
        )
    )
    assert out[0][1].last_reward.tolist() == [1.0, 1.0] and out[1][1].last_reward.tolist() == [2.0, 3.0]
    g.close()


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"env_cfg_list is empty: an EnvGroup needs at least one EnvConfig"):
        EnvGroup([])
    with pytest.raises(TypeError, match=r"env_cfg_list\[1\] must be an EnvConfig, got dict"):
        EnvGroup([_fixed(), {"name": "CartPole-v1"}])
    with pytest.raises(ValueError, match=r"env_cfg_list\[0\]\.num_envs must be an int >= 1, got 0"):
        EnvGroup([EnvConfig.model_construct(name="CartPole-v1", num_envs=0, backend="gymnasium")])
    with pytest.raises(ValueError, match=r"preprocess_fn has 1 functions for 2 env workers"):
        EnvGroup([_fixed(), _fixed()], preprocess_fn=[None])
    with pytest.raises(TypeError, match=r"preprocess_fn\[0\] must be callable"):
        EnvGroup([_fixed()], preprocess_fn=42)
    with pytest.raises(KeyError, match=r"unknown env 'gymnasum'\. Did you mean 'gymnasium'"):
        EnvGroup([EnvConfig(backend="gymnasum")])


def test_unknown_env_id_fails_in_init_before_any_worker():
    g = EnvGroup([EnvConfig(name="CartPole-v1"), EnvConfig(name="CartPoel-v1")])
    with pytest.raises(KeyError, match=r"unknown env id 'CartPoel-v1'\. Closest registered names: 'CartPole-v1'"):
        g.init()
    assert not g.is_initialized and g.workers == {}


def test_multi_agent_env_in_a_group():
    g = EnvGroup([EnvConfig(name="rendezvous", num_envs=2)])
    g.init()
    rets = g.reset(seed=0)
    env_id = g.env_ids[0]
    assert env_id == "rendezvous-0" and set(rets[0][1].observation) == {"agent_0", "agent_1"}
    for _ in range(40):
        action = {a: np.random.default_rng(0).integers(0, 3, 2) for a in ("agent_0", "agent_1")}
        rets = g.step(BatchedData([env_id], [MultiAgentPolicyResponse(env_id, action=action)]))
    assert g.stats()["episodes"] >= 2
    g.close()


def test_close_is_idempotent_and_group_can_init_again():
    g = EnvGroup([_fixed()])
    g.init()
    g.close()
    g.close()
    assert not g.is_initialized and g.workers == {}
    assert len(g.init()) == 1
    g.close()
