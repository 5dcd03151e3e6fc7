"""Tests of rlightning/env/rollout_worker.py and acting.py: env workers acting with their own policy copy."""

import pickle
import subprocess
import sys

import numpy as np
import pytest
import torch

from rlightning.env import EnvGroup, GymnasiumEnv, RolloutWorker
from rlightning.env.utils.episodes import EpisodeIds
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import PolicyResponse, validate_record
from rlightning.utils.config import EnvConfig, PolicyConfig

SMALL = PolicyConfig(type="ppo", hidden_sizes=[16])


@pytest.fixture
def group():
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=3), EnvConfig(name="CartPole-v1", num_envs=2)])
    metas = g.init()
    g.attach_policy(PPOPolicy, SMALL, metas[0], seed=0)
    yield g
    g.close()


def _trained_weights(meta, version_seed=3):
    torch.manual_seed(version_seed)
    train = PPOPolicy(SMALL, PolicyRole.TRAIN)
    train.setup(meta)
    return train


def test_a_rollout_is_one_record_per_worker(group):
    group.reset(seed=5)
    results = dict(group.collect_rollouts(num_steps=40))
    assert list(results) == group.env_ids
    for env_id, res in results.items():
        n = 3 if env_id.endswith("-0") else 2
        td = res.record
        assert tuple(td.batch_size) == (n, 40) and res.num_steps == 40 and res.num_envs == n
        validate_record(td, num_envs=n, observation_space=group.env_metas[0].observation_space, require_env_id=True)
        assert td.get_non_tensor("env_id") == env_id
        assert {"log_prob", "value", "action", "episode_id", "valid"} <= set(td.keys())
        assert set(td["action"].unique().tolist()) <= {0, 1}
        # next.obs of step t is obs of step t+1, and both are views of one array: one copy per observation.
        assert torch.equal(td["next", "obs"][:, :-1], td["obs"][:, 1:])
        assert td["obs"].untyped_storage().data_ptr() == td["next", "obs"].untyped_storage().data_ptr()
        assert torch.equal(td["next", "done"], td["next", "terminated"] | td["next", "truncated"])
        # NEXT_STEP autoreset: the step after a done row is not valid and starts the row's next episode.
        done = td["next", "done"]
        assert torch.equal(~td["valid"][:, 1:], done[:, :-1])
        ids = td["episode_id"]
        assert torch.equal(ids[:, 1:] != ids[:, :-1], ~td["valid"][:, 1:])
        assert res.inference_s > 0 and res.env_step_s > 0 and res.weight_version == 0
        assert len(res.episode_returns) == int(done.sum())
    assert group.stats()["env_steps"] == 40 * 5
    # What crosses a process boundary is the arrays, the observations once: unpickled, they are still one.
    res = pickle.loads(pickle.dumps(results[group.env_ids[0]]))
    assert res.record["obs"].untyped_storage().data_ptr() == res.record["next", "obs"].untyped_storage().data_ptr()
    assert torch.equal(res.record["next", "obs"], results[group.env_ids[0]].record["next", "obs"])
    all_ids = torch.cat([r.record["episode_id"].flatten() for r in results.values()])
    first = results[group.env_ids[0]].record["episode_id"]
    assert len(set(first.flatten().tolist())) == 3 + int((~results[group.env_ids[0]].record["valid"]).sum())
    assert all_ids.min() == 0


def test_a_rollout_continues_where_the_last_call_left_off(group):
    group.reset(seed=1)
    first = dict(group.collect_rollouts(7))
    between = group.step(_zero_actions(group))  # the per-step API moves the same worker on
    second = dict(group.collect_rollouts(5))
    for env_id, ret in between.items():
        a, b = first[env_id].record, second[env_id].record
        np.testing.assert_array_equal(b["obs"][:, 0].numpy(), ret.observation)
        # A row that was not done at either step is still in the same episode.
        same = ~a["next", "done"][:, -1] & ~torch.from_numpy(ret.last_terminated | ret.last_truncated)
        assert torch.equal(a["episode_id"][:, -1][same], b["episode_id"][:, 0][same])
        assert bool((b["episode_id"][:, 0][~same] > a["episode_id"].max()).all())
    group.reset(seed=1)
    again = dict(group.collect_rollouts(7))
    for env_id in group.env_ids:  # the same seed gives the same observations at reset
        assert torch.equal(first[env_id].record["obs"][:, 0], again[env_id].record["obs"][:, 0])


def _zero_actions(group):
    from rlightning.types import BatchedData

    metas = group.env_metas
    return BatchedData(group.env_ids, [PolicyResponse(m.env_id, action=np.zeros(m.num_envs, np.int64)) for m in metas])


def test_the_record_replays_on_the_env_stepped_by_hand(group):
    """A record's next observations and rewards are what the env's own step() returns for its actions."""
    env_id = group.env_ids[0]
    twin = GymnasiumEnv(EnvConfig(name="CartPole-v1", num_envs=3))
    start = group.reset(seed=11)
    np.testing.assert_array_equal(twin.reset(seed=11).observation, start[0][1].observation)
    td = dict(group.collect_rollouts(30))[env_id].record
    for t in range(30):
        got = twin.step(PolicyResponse(twin.env_id, action=td["action"][:, t].numpy()))
        np.testing.assert_array_equal(got.observation, td["next", "obs"][:, t].numpy())
        np.testing.assert_array_equal(got.last_reward, td["next", "reward"][:, t].numpy())
        np.testing.assert_array_equal(got.last_terminated, td["next", "terminated"][:, t].numpy())


def test_loaded_weights_reach_every_copy_with_their_version(group):
    train = _trained_weights(group.env_metas[0])
    group.load_policy_weights(train.get_weights(), weight_version=7)
    for worker in group.workers.values():
        assert worker.policy_weights_checksum() == train.weights_checksum()
        assert worker.policy_weight_version() == 7
    group.reset(seed=0)
    assert {r.weight_version for _, r in group.collect_rollouts(2)} == {7}


def test_bad_calls_name_what_is_wrong(group):
    worker = group.workers[group.env_ids[0]]
    with pytest.raises(RuntimeError, match=r"collect before reset\(\)"):
        worker.collect(3)
    group.reset(seed=0)
    with pytest.raises(ValueError, match=r"num_steps must be an int >= 1, got 0"):
        worker.collect(0)
    with pytest.raises(ValueError, match=r"collect_rollouts: num_steps must be an int >= 1, got 2.5"):
        list(group.collect_rollouts(2.5))
    with pytest.raises(TypeError, match=r"attach_policy needs a BasePolicy subclass"):
        worker.attach_policy(dict, PolicyConfig(), group.env_metas[0])
    with pytest.raises(TypeError, match=r"env_cls must be a BaseEnv subclass, got <class 'dict'>"):
        RolloutWorker(dict, EnvConfig())


def test_without_a_policy_the_group_and_worker_say_how_to_get_one():
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=2)])
    g.init()
    try:
        assert not g.has_policy
        g.reset(seed=0)
        with pytest.raises(RuntimeError, match=r"call attach_policy first"):
            list(g.collect_rollouts(2))
        with pytest.raises(RuntimeError, match=r"load_policy_weights needs attach_policy first"):
            g.load_policy_weights({}, 1)
        with pytest.raises(RuntimeError, match=r"needs a policy in the env worker; call attach_policy"):
            g.workers[g.env_ids[0]].collect(2)
    finally:
        g.close()
    assert not g.has_policy


class _ScriptedCopy:
    """An `ActingPolicy` that is no `BasePolicy`: it answers every observation with the outputs it is given."""

    weight_version = 0
    deterministic = False
    stateful_acting = False
    acts_on_observations = True

    def __init__(self, out, worker_index=0):
        self.out, self.worker_index = out, worker_index

    def compute_actions(self, obs, deterministic=False):
        return self.out

    def rollout_batch(self, env_rets):
        raise AssertionError("a copy that acts on observations is never asked for EnvRets")

    def num_parameters(self):
        return 0

    def load_state_dict(self, state_dict, weight_version=None):
        return self.set_weight_version(weight_version or 0)

    def copy_weights_from(self, other, weight_version=None):
        return self.set_weight_version(weight_version or 0)

    def set_weight_version(self, weight_version):
        self.weight_version = int(weight_version)
        return self.weight_version

    def set_deterministic(self, deterministic=True):
        self.deterministic = bool(deterministic)

    def weights_checksum(self):
        return "scripted"


def test_multi_agent_envs_collect_per_agent_and_need_per_agent_outputs():
    from rlightning.env import RendezvousEnv

    worker = RolloutWorker(RendezvousEnv, EnvConfig(name="rendezvous", num_envs=2))
    worker.reset(seed=0)
    flat = {"action": np.zeros(2, np.int64)}  # a single-agent policy's output
    worker.attach_policy(lambda worker_index: _ScriptedCopy(flat, worker_index))
    with pytest.raises(ValueError, match=r"a multi-agent env takes a dict of agent id -> actions"):
        worker.collect(2)
    per_agent = {"action": {"agent_0": np.ones(2, np.int64), "agent_1": np.ones(2, np.int64)}}
    worker.policy.out = per_agent
    td = worker.collect(3).record
    assert td["agents", "agent_1", "action"].shape == (2, 3) and td["next", "agents", "agent_0", "obs"].shape == (
        2,
        3,
        2,
    )


def test_the_copy_comes_from_the_policy_sides_factory_which_a_class_stands_for():
    from rlightning.env.acting_policy import ActingPolicy
    from rlightning.policy.acting_copy import EvalCopyFactory

    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=2)] * 2)
    meta = g.init()[0]
    try:
        factory = PPOPolicy.acting_copy_factory(SMALL, meta, seed=4)
        assert isinstance(factory, EvalCopyFactory) and pickle.loads(pickle.dumps(factory)) == factory
        infos = g.attach_policy(factory)
        assert [i["weight_version"] for i in infos] == [0, 0] and infos[0]["num_parameters"] > 0
        w0, w1 = g.workers.values()
        assert isinstance(w0.policy, PPOPolicy) and isinstance(w0.policy, ActingPolicy)
        assert (w0.policy.role_type, w1.policy.worker_index) == (PolicyRole.EVAL, 1)
        by_factory = [w.policy_weights_checksum() for w in (w0, w1)]
        assert by_factory[0] != by_factory[1]  # the seed is offset by the worker's index
        g.attach_policy(PPOPolicy, SMALL, meta, seed=4)  # the class asks for the same factory: the same copies
        assert [w.policy_weights_checksum() for w in g.workers.values()] == by_factory
    finally:
        g.close()


def test_attach_policy_names_what_is_wrong_with_its_arguments():
    worker = RolloutWorker(GymnasiumEnv, EnvConfig(name="CartPole-v1", num_envs=2))
    meta = worker.get_metadata()
    factory = PPOPolicy.acting_copy_factory(SMALL, meta)
    with pytest.raises(ValueError, match=r"got a policy-copy factory and policy_config, seed; a factory holds its own"):
        worker.attach_policy(factory, SMALL, seed=0)
    with pytest.raises(TypeError, match=r"needs a BasePolicy subclass or a policy-copy factory .* got int"):
        worker.attach_policy(42)
    with pytest.raises(TypeError, match=r"attach_policy\(PPOPolicy, ...\) needs env_meta"):
        worker.attach_policy(PPOPolicy, SMALL)
    with pytest.raises(
        TypeError, match=r"PPOPolicy.acting_copy_factory: policy_config must be a PolicyConfig, got dict"
    ):
        worker.attach_policy(PPOPolicy, {"type": "ppo"}, meta)
    with pytest.raises(TypeError, match=r"env_meta must be an EnvMeta .* got dict"):
        worker.attach_policy(PPOPolicy, SMALL, {"num_envs": 2})
    with pytest.raises(TypeError, match=r"built a object, which is not an ActingPolicy; missing: acts_on_observations"):
        worker.attach_policy(lambda worker_index: object())
    assert not worker.has_policy  # nothing was attached by the failed calls
    worker.attach_policy(factory)
    assert worker.has_policy and worker.acts_on_observations


def test_episode_ids_count_per_worker_and_follow_the_valid_flags():
    ids = EpisodeIds(2, base=10)
    np.testing.assert_array_equal(ids.reset(), [10, 11])
    valid = np.array([[True, False, True, False], [True, True, True, True]])
    np.testing.assert_array_equal(ids.assign(valid), [[10, 12, 12, 13], [11, 11, 11, 11]])
    np.testing.assert_array_equal(ids.assign(np.array([[False], [False]])), [[14], [15]])  # time-major, then row
    np.testing.assert_array_equal(ids.reset(), [16, 17])
    with pytest.raises(ValueError, match=r"valid must be \[num_envs=2, T\], got shape \(3,\)"):
        ids.assign(np.ones(3, bool))


def test_importing_the_env_package_imports_no_policy_code():
    code = "import rlightning.env, sys; print([m for m in sys.modules if m.startswith(('rlightning.policy', 'torch'))])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.ray
def test_ray_workers_results_come_in_worker_order_whichever_finishes_first(ray_runtime, remote_flags):
    """A seeded run stores the same data every time: results are yielded in worker order, not arrival."""
    remote_flags(REMOTE_ENV=True)
    slow, fast = EnvConfig(name="CartPole-v1", num_envs=64, num_cpus=0.25), EnvConfig(name="CartPole-v1", num_envs=1)
    g = EnvGroup([slow, fast.model_copy(update={"num_cpus": 0.25})])
    try:
        metas = g.init()
        assert g.is_remote
        g.attach_policy(PPOPolicy, SMALL, metas[0], seed=0)
        g.reset(seed=0)
        results = list(g.collect_rollouts(200))  # worker 0 steps 64 envs, worker 1 one: 1 is done first
        assert [env_id for env_id, _ in results] == g.env_ids
        assert [tuple(r.record.batch_size) for _, r in results] == [(64, 200), (1, 200)]
        validate_record(results[0][1].record, num_envs=64, require_env_id=True)
    finally:
        g.close()


def test_local_workers_step_together_with_one_forward_pass_per_step():
    g = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=3), EnvConfig(name="CartPole-v1", num_envs=2)])
    metas = g.init()
    try:
        g.attach_policy(PPOPolicy, PolicyConfig(type="ppo", hidden_sizes=[16], deterministic_eval=True), metas[0], 0)
        w0, w1 = g.workers.values()
        calls = {0: [], 1: []}
        for i, w in enumerate((w0, w1)):
            real = w.policy.compute_actions
            w.policy.compute_actions = lambda obs, _r=real, _i=i, **kw: calls[_i].append(len(obs)) or _r(obs, **kw)
        g.reset(seed=2)
        list(g.collect_rollouts(2))  # never synced: each copy holds its own initial weights and acts alone
        assert calls == {0: [3, 3, 3], 1: [2, 2, 2]}  # + one for the value of the last next.obs
        g.load_policy_weights(w0.policy.get_weights(), 1)
        calls[0].clear(), calls[1].clear()
        g.reset(seed=2)
        together = dict(g.collect_rollouts(20))
        assert calls == {0: [5] * 21, 1: []}  # worker 0's copy acted for all five rows, once per step (+ bootstrap)
        g.reset(seed=2)
        alone = {w.env_id: w.collect(20) for w in (w0, w1)}  # each on its own: same deterministic actions
        for env_id in g.env_ids:
            a, b = together[env_id].record, alone[env_id].record
            assert torch.equal(a["action"], b["action"]) and torch.equal(a["next", "obs"], b["next", "obs"])
            torch.testing.assert_close(a["value"], b["value"])
            torch.testing.assert_close(a["next", "value"][:, :-1], a["value"][:, 1:])  # next.value: the bootstrap
            assert together[env_id].inference_s > 0
    finally:
        g.close()
