"""Faults on a real Ray runtime: env, eval, storage and train actors killed in the middle of a run."""

from __future__ import annotations

import pytest

from rlightning.buffer.data_buffer import StorageShardLostError
from rlightning.policy.policy_group import WorkerLostError
from tests.support.cluster import kill_actor
from tests.support.configs import small_ppo, small_sac

pytestmark = pytest.mark.ray


def test_killed_workers_mid_run_restart_or_stop_naming_the_checkpoint(tmp_path, ray_runtime, build):
    """Env and eval actors are restarted and re-synced; a dead train worker stops the run; resume continues."""
    from rlightning.widgets.dashboard import engine_state

    cfg = small_ppo(
        tmp_path,
        True,
        "train.iterations=6",
        "train.checkpoint_interval=1",
        "log.name=faulty",
        "cluster.inference=eval_workers",  # the eval worker acts every step (env-worker copies: test_collect.py)
    )
    engine = build(cfg).engine
    engine.step()
    group = engine.policy_group
    old_eval = group.eval_workers[0].worker
    kill_actor(old_eval)
    kill_actor(engine.env_group.workers[engine.env_ids[0]])
    metrics = engine.step()  # the rollout meets both dead actors and carries on
    assert group.eval_workers[0].worker is not old_eval
    assert metrics["eval_restarts"] == 1 and metrics["env_restarts"] == 1
    assert group.stats()["eval_restarts"] == [1]
    # The relaunched eval worker holds train rank 0's weights, then follows the next sync.
    assert group.verify_eval_weight_consistency()["consistent"]
    metrics = engine.step()
    assert metrics["iteration"] == 3 and metrics["eval_restarts"] == 1
    assert group.verify_eval_weight_consistency()["consistent"]
    assert engine_state(engine)["restarts"] == {"env_restarts": 1, "eval_restarts": 1, "storage_restarts": 0}

    returns_before = [m.get("episode_return_mean") for m in engine.metrics.history]
    steps_at_checkpoint = engine.env_steps
    kill_actor(group.train_workers[0].worker)
    with pytest.raises(WorkerLostError, match=r"train worker 0 died .*last checkpoint is .*iter_000003") as info:
        engine.step()
    assert info.value.role == "train" and info.value.checkpoint.endswith("iter_000003")
    assert engine.iteration == 3 and engine.phase == "idle"
    engine.close()

    resumed = build(cfg).engine
    resumed.load(info.value.checkpoint)
    assert resumed.iteration == 3 and resumed.env_steps == steps_at_checkpoint
    metrics = resumed.step()
    assert metrics["iteration"] == 4 and resumed.env_steps > steps_at_checkpoint
    history = resumed.metrics.history
    assert [m["iteration"] for m in history] == [1, 2, 3, 4]
    assert [m.get("episode_return_mean") for m in history[:3]] == returns_before


def test_eval_worker_dying_too_often_stops_with_a_clear_error(ray_runtime, remote_flags):
    from rlightning.policy.builder import build_policy_group
    from rlightning.utils.config import ClusterConfig, PolicyConfig
    from tests.support.policy_data import DISCRETE_META, env_batch

    remote_flags(REMOTE_TRAIN=False, REMOTE_EVAL=True)
    cluster = ClusterConfig(train_worker_num=1, eval_worker_num=1, eval_each_cpu_num=0.25)
    group = build_policy_group("ppo", PolicyConfig(hidden_sizes=[8], max_restarts=1), cluster)
    try:
        group.construct_network(DISCRETE_META, seed=0)
        batch = env_batch(2)
        kill_actor(group.eval_workers[0].worker)
        assert len(group.rollout_batch(batch)) == 2  # restarted once, answered
        group.verify_eval_weight_consistency()
        kill_actor(group.eval_workers[0].worker)
        with pytest.raises(WorkerLostError, match=r"eval worker 0 died .*restarted 1 time.*max_restarts=1"):
            group.rollout_batch(batch)
    finally:
        group.shutdown()


def test_killed_storage_shard_is_replaced_and_reported(tmp_path, ray_runtime, build):
    cfg = small_sac(tmp_path, True, "env.num_workers=2", "cluster.buffer_worker_num=2", "train.iterations=6")
    engine = build(cfg).engine
    for _ in range(3):
        engine.step()
    before = engine.buffer.stats()
    kept, lost = before["shards"]
    assert kept["episodes"] > 0 and lost["size"] > 0
    kill_actor(engine.buffer.storages[1])
    for _ in range(2):
        metrics = engine.step()
    after = engine.buffer.stats()
    # The surviving shard kept every completed episode it had, and went on filling.
    assert after["shards"][0]["episodes"] >= kept["episodes"]
    assert after["shards"][0]["size"] >= kept["size"]
    # The lost shard is reported with what it held, and the run goes on with a fresh one.
    (record,) = engine.buffer.lost_shards
    assert record["shard"] == 1 and record["size"] == lost["size"]
    assert record["env_ids"] == lost["env_ids"] and record["episodes"] == lost["episodes"]
    assert after["shard_restarts"] == 1 and after["lost_shards"][0]["shard"] == 1
    assert 0 < after["shards"][1]["size"] < lost["size"] + 64
    assert metrics["storage_restarts"] == 1 and metrics["iteration"] == 5


def test_lost_shard_with_raise_policy_names_what_it_held(ray_runtime, remote_flags):
    import torch

    from rlightning.buffer.builder import build_data_buffer
    from rlightning.utils.config import BufferConfig

    remote_flags(REMOTE_STORAGE=True)
    buffer = build_data_buffer("replay", BufferConfig(type="replay", capacity=1000, on_shard_loss="raise"))
    buffer.init([], num_storages=2, storage_options={"num_cpus": 0.25})
    try:
        buffer.extend({"obs": torch.arange(40, dtype=torch.float32).reshape(20, 2), "reward": torch.ones(20)})
        assert buffer.get_size() == 20
        kill_actor(buffer.storages[1])
        with pytest.raises(StorageShardLostError, match=r"storage shard 1 died .*held 10 transitions") as info:
            buffer.get_size()
        assert info.value.shard == 1 and info.value.held["size"] == 10
        # Nothing of the surviving shard was touched.
        assert buffer.storages[0] is not None and ray_runtime.get(buffer.storages[0].get_size.remote()) == 10
    finally:
        buffer.close()
