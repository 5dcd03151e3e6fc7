"""Tests of rlightning/engine/collect.py: rollouts through the policy group, or inside the env workers."""

import numpy as np
import pytest
import torch

from rlightning.utils.ray.handle import WorkerHandle
from tests.support.buffer_fakes import RecordBuffer
from tests.support.configs import small_ppo

IN_ENV_WORKERS = "cluster.inference=env_workers"


def _copies_checksums(engine):
    return {i: WorkerHandle(w).call("policy_weights_checksum") for i, w in engine.env_group.workers.items()}


def test_env_workers_store_what_the_eval_workers_would_have(tmp_path, build):
    """Same seed, deterministic actions: acting in the env workers stores the very same transitions."""
    datas = []
    for extra in ([], [IN_ENV_WORKERS]):
        engine = build(small_ppo(tmp_path, False, "policy.deterministic_eval=true", *extra)).engine
        assert engine.rollout()["rollout_env_steps"] == 32 * 8
        datas.append(engine.buffer.get_data())
    by_eval, by_env = datas
    assert by_eval.batch_size == by_env.batch_size and by_eval.batch_size[0] > 200
    for key in ("obs", "action", "reward", "next_obs", "done"):
        assert torch.equal(by_eval[key], by_env[key]), key
    for key in ("log_prob", "value", "advantage", "return"):  # one forward over 8 rows vs two over 4
        torch.testing.assert_close(by_eval[key], by_env[key], rtol=1e-5, atol=1e-5)


def test_env_worker_copies_follow_every_weight_sync(tmp_path, build):
    engine = build(small_ppo(tmp_path, False, IN_ENV_WORKERS)).engine
    train = engine.policy_group.train_workers[0]
    before = train.call("weights_checksum")
    assert set(_copies_checksums(engine).values()) == {before}
    metrics = engine.step()
    assert metrics["env_steps"] == 32 * 8
    after = train.call("weights_checksum")
    assert after != before and set(_copies_checksums(engine).values()) == {after}
    versions = {r.weight_version for _, r in engine.env_group.collect_rollouts(1)}
    assert versions == {engine.policy_group.weight_version}
    rec = engine.timing.records[0]
    for key in ("rollout", "train", "sync_weights", "env_step", "inference", "buffer_add"):
        assert rec[key] > 0, key
    assert np.isfinite(metrics["policy_loss"])


@pytest.mark.ray
def test_ray_env_worker_killed_mid_run_comes_back_with_the_current_weights(tmp_path, ray_runtime, build):
    from tests.support.cluster import kill_actor

    cfg = small_ppo(tmp_path, False, "cluster.remote_env=true", "env.num_cpus=0.25", IN_ENV_WORKERS)
    engine = build(cfg).engine
    assert engine.env_group.is_remote
    engine.step()
    victim = engine.env_ids[0]
    kill_actor(engine.env_group.workers[victim])
    metrics = engine.step()  # the dead worker's rollout is lost; it is relaunched, reset and re-armed
    assert metrics["env_restarts"] == 1
    assert metrics["env_steps"] == 32 * 8 + 32 * 4  # the survivor's steps of iteration 2 only
    checksum = engine.policy_group.train_workers[0].call("weights_checksum")
    assert set(_copies_checksums(engine).values()) == {checksum}
    metrics = engine.step()
    assert metrics["env_steps"] == 32 * 8 * 2 + 32 * 4 and metrics["env_restarts"] == 1


@pytest.mark.ray
@pytest.mark.parametrize("remote_env", [True, False])
def test_a_ray_train_workers_weights_reach_the_copies_without_a_copy_through_the_driver(
    tmp_path, ray_runtime, build, monkeypatch, remote_env
):
    import ray

    from rlightning.types.batched import is_object_ref

    cfg = small_ppo(
        tmp_path,
        False,
        "cluster.remote_train=true",
        "cluster.train_each_cpu_num=0.25",
        f"cluster.remote_env={str(remote_env).lower()}",
        "env.num_cpus=0.25",
        IN_ENV_WORKERS,
    )
    engine = build(cfg).engine
    assert is_object_ref(engine.policy_group.weights_ref()), "a Ray train worker's weights should stay in the store"
    puts = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(type(value)) or real_put(value, **kw))
    engine.step()
    checksum = engine.policy_group.train_workers[0].call("weights_checksum")
    assert set(_copies_checksums(engine).values()) == {checksum}
    assert engine.env_weight_sync.effective == "object_store"  # the train actor's object, read by every copy
    assert engine.env_weight_sync.version == engine.policy_group.weight_version
    assert dict not in puts, f"weights were put again from the driver: {puts}"


@pytest.mark.ray
def test_a_seeded_run_on_ray_env_workers_trains_the_same_weights_twice(tmp_path, ray_runtime, build):
    checksums, losses = [], []
    for run in range(2):
        cfg = small_ppo(tmp_path / str(run), False, "cluster.remote_env=true", "env.num_cpus=0.25", IN_ENV_WORKERS)
        engine = build(cfg).engine
        history = engine.run(iterations=3)
        checksums.append(engine.policy_group.train_workers[0].call("weights_checksum"))
        losses.append([m["policy_loss"] for m in history])
        engine.close()
    assert losses[0] == losses[1] and checksums[0] == checksums[1], (losses, checksums)


def test_env_workers_act_so_no_eval_worker_is_built_and_evaluation_still_plays(tmp_path, build):
    engine = build(small_ppo(tmp_path, False, IN_ENV_WORKERS, "train.eval_episodes=3")).engine
    assert engine.config.cluster.eval_worker_num == 1  # the config is left as written
    group = engine.policy_group
    assert group.eval_workers == [] and group.stats()["weight_sync"]["effective"] == "none"
    # The env workers' copies are the acting eval policy: same strategies, here the direct in-process copy.
    assert engine.env_weight_sync.effective == "local_copy"
    assert engine.env_weight_sync.version == group.weight_version == 1
    result = engine.evaluate()
    assert result["episodes"] == 3 and result["return_mean"] > 0
    assert engine.evaluator.env_group is not None
    engine.close()
    assert engine.evaluator.env_group is None


def test_the_per_step_layout_keeps_its_eval_worker(tmp_path, build):
    engine = build(small_ppo(tmp_path, False, "cluster.inference=eval_workers")).engine
    assert len(engine.policy_group.eval_workers) == 1 and engine.env_weight_sync is None


def test_the_eval_engine_keeps_its_eval_workers_whatever_the_inference_setting():
    from rlightning.utils.config import apply_overrides, load_preset
    from rlightning.utils.validate import acting_cluster

    cfg = load_preset("cartpole_ppo")
    assert cfg.cluster.inference == "env_workers" and acting_cluster(cfg).eval_worker_num == 0
    assert acting_cluster(apply_overrides(cfg, ["engine=eval"])).eval_worker_num == cfg.cluster.eval_worker_num
    per_step = apply_overrides(cfg, ["cluster.inference=eval_workers"])
    assert acting_cluster(per_step) is per_step.cluster


def test_a_collector_owns_the_rollout_state_and_the_stop_flag(tmp_path, build):
    engine = build(small_ppo(tmp_path, False, "cluster.inference=eval_workers")).engine
    collector = engine.collector
    assert not collector.started and collector.env_rets is None
    engine.rollout()
    assert collector.started and list(collector.env_rets.ids()) == engine.env_ids
    engine.stop()
    assert collector.stop_requested and engine.stop_requested
    engine.run(iterations=1)  # run() clears an earlier stop request
    assert engine.iteration == 1
    engine.load(str(engine.save()))
    assert not collector.started  # a loaded checkpoint resets the envs on the next rollout


class _Zeros:
    """Acts 0 everywhere (a stand-in policy group for the per-step layout)."""

    def rollout_batch(self, batch):
        from rlightning.types import BatchedData, PolicyResponse

        return BatchedData(
            list(batch.ids()),
            [PolicyResponse(i, action=np.zeros(r.observation.shape[0], np.int64)) for i, r in batch.items()],
        )


def test_the_per_step_layout_stores_one_record_per_worker_and_rollout():
    from rlightning.engine.collect import Collector
    from rlightning.engine.timing import Timing
    from rlightning.env import EnvGroup
    from rlightning.types import validate_record
    from rlightning.utils.config import EnvConfig

    group = EnvGroup([EnvConfig(name="CartPole-v1", num_envs=3), EnvConfig(name="CartPole-v1", num_envs=2)])
    metas = group.init()
    buffer = RecordBuffer()
    collector = Collector(group, _Zeros(), buffer, Timing(), group.env_ids, 5, in_env_workers=False)
    try:
        assert collector.collect(12, seed=3) == 12 * 5
        # One [N, T] record per worker, in worker order: the shape the env-worker layout stores.
        assert [r.get_non_tensor("env_id") for r in buffer.records] == group.env_ids
        assert [tuple(r.batch_size) for r in buffer.records] == [(3, 12), (2, 12)]
        for rec in buffer.records:
            validate_record(rec, observation_space=metas[0].observation_space, require_env_id=True)
            assert torch.equal(rec["next", "obs"][:, :-1], rec["obs"][:, 1:])
            assert bool(rec["next", "done"].any())  # pushing left: poles fall
            # The step after a done row is not valid and starts the row's next episode.
            assert torch.equal(~rec["valid"][:, 1:], rec["next", "done"][:, :-1])
            ids = rec["episode_id"]
            assert torch.equal(ids[:, 1:] != ids[:, :-1], rec["next", "done"][:, :-1])
        # One step at a time (the async engine's rollout thread): each step is stored at once, as one [N, 1]
        # record per worker.
        buffer.records.clear()
        assert collector.collect_steps(1, bootstrap=False) == 5
        assert [tuple(r.batch_size) for r in buffer.records] == [(3, 1), (2, 1)]
        first = dict(zip(group.env_ids, buffer.records))
        np.testing.assert_array_equal(
            first[group.env_ids[0]]["next", "obs"][:, 0].numpy(), collector.env_rets[0][1].observation
        )
        # A second reset truncates the episodes in progress.
        collector.reset(seed=4)
        assert buffer.truncated == [sorted(group.env_ids)]
    finally:
        group.close()


@pytest.mark.parametrize("preset", ["cartpole_dqn", "pendulum_td3"])
def test_a_seeded_run_acting_in_an_eval_worker_stores_the_same_steps_twice(tmp_path, build, preset):
    """The eval worker's exploration draws (epsilon-greedy, TD3's action noise) come from the seed too: the
    engine seeds the policy workers it builds, not only the env workers' copies."""
    from rlightning.utils.config import apply_overrides, load_preset

    stored = []
    for run in range(2):
        cfg = apply_overrides(
            load_preset(preset),
            ["log.progress=false", f"log.run_dir={tmp_path / str(run)}", "train.rollout_steps=256", "seed=3"],
        )
        assert cfg.cluster.inference == "eval_workers"
        engine = build(cfg).engine
        engine.step()
        data = engine.buffer.get_data()
        stored.append({k: data[k].clone() for k in ("obs", "action")})
        engine.close()
    for key in ("obs", "action"):
        assert torch.equal(stored[0][key], stored[1][key]), key


def test_a_dqn_acting_in_its_env_worker_explores_and_learns_as_in_an_eval_worker(tmp_path, build):
    """The env worker's copy counts the rows it answers (`BasePolicy.count_rollout`), as an eval worker's
    rollout_batch does: epsilon decays the same way before the first sync, so both placements train the very
    same weights from one seed."""
    from rlightning.utils.config import apply_overrides, load_preset

    results = []
    for extra in ([], [IN_ENV_WORKERS]):
        cfg = apply_overrides(
            load_preset("acrobot_dqn"),
            [
                "log.progress=false",
                f"log.run_dir={tmp_path / str(len(results))}",
                "train.rollout_steps=64",
                "train.learning_starts=128",
                "train.store_open_episodes=true",  # each rollout stored at its end: training from iteration 2
                "policy.hidden_sizes=[32]",
                "policy.epsilon_decay_steps=256",
                "seed=5",
                *extra,
            ],
        )
        engine = build(cfg).engine
        for _ in range(4):
            engine.step()
        data = engine.buffer.get_data()
        learner = engine.policy_group.train_workers[0].worker
        if extra:
            copy = next(iter(engine.env_group.workers.values())).policy
            assert copy._rollout_rows == 4 * 64  # the rows it answered, before and after the syncs
        results.append((data["action"].clone(), learner.weights_checksum()))
        engine.close()
    (actions_eval, weights_eval), (actions_env, weights_env) = results
    assert torch.equal(actions_eval, actions_env)
    assert weights_eval == weights_env
