import os
import signal

import pytest

from rlightning.engine import SyncRLEngine
from tests.support.configs import small_ppo


def test_phases_one_cell_at_a_time(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine
    assert isinstance(e, SyncRLEngine) and e.on_policy
    out = e.rollout()
    assert out["rollout_env_steps"] == 32 * 8 and e.env_steps == 256
    assert e.buffer.stats()["size"] > 0
    assert e.update_dataset()["batch_size"] > 0
    metrics = e.train()
    assert {"policy_loss", "value_loss", "entropy"} <= set(metrics)
    v0 = e.policy_group.weight_version
    assert e.sync_weights()["weight_version"] == v0 + 1


def test_step_records_metrics_timing_and_jsonl(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine
    m = e.step()
    assert m["iteration"] == 1 and m["env_steps"] == 256 and m["env_steps_per_sec"] > 0
    assert "episode_return_mean" in m and "policy_loss" in m
    rec = e.timing.records[0]
    for key in ("rollout", "update_dataset", "train", "sync_weights", "env_step", "inference", "buffer_add"):
        assert rec[key] > 0, key
    assert (e.run_dir / "metrics.jsonl").read_text().count("\n") == 1
    assert e.phase == "idle"


def test_run_limits_and_callbacks(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine
    assert len(e.run(iterations=2)) == 2 and e.iteration == 2
    seen = []
    history = e.run(iterations=5, callbacks=[lambda eng, m: seen.append(m["iteration"]) or False])
    assert len(history) == 1 and seen == [3]
    history = e.run(iterations=10, env_steps=e.env_steps + 300)
    assert len(history) == 2
    history = e.run(iterations=10, until_return=-1.0)
    assert len(history) == 1


def test_interrupt_stops_cleanly_between_phases(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine

    def interrupt(engine, metrics):
        os.kill(os.getpid(), signal.SIGINT)

    # Python's own handler to start from, whatever this process inherited (a job started in the background
    # by a non-interactive shell inherits SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        history = e.run(iterations=4, callbacks=[interrupt])
        assert len(history) == 1 and e.iteration == 1
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        assert len(e.run(iterations=1)) == 1  # usable again afterwards
    finally:
        signal.signal(signal.SIGINT, inherited)


def test_stop_flag_breaks_a_rollout(tmp_path, build):
    e = build(small_ppo(tmp_path, False, "cluster.inference=eval_workers")).engine
    e.stop()
    assert e.stop_requested
    out = e.iteration_phases()
    assert out["rollout_env_steps"] == 8  # one step, then the flag was seen
    assert "policy_loss" not in out


def test_stop_flag_with_env_worker_inference_stops_after_the_rollout(tmp_path, build):
    e = build(small_ppo(tmp_path, False, "cluster.inference=env_workers")).engine
    e.stop()
    out = e.iteration_phases()
    assert out["rollout_env_steps"] == 32 * 8  # the workers' one call per rollout runs to its end
    assert "policy_loss" not in out


def test_closed_engine_refuses_to_step(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine
    e.close()
    e.close()  # idempotent
    with pytest.raises(RuntimeError, match="engine is closed"):
        e.step()


@pytest.mark.ray
def test_remote_workers_smoke(tmp_path, build, ray_runtime, remote_flags):
    parts = build(small_ppo(tmp_path, True))
    assert parts.env_group.stats()["remote"] is True
    m = parts.engine.step()
    assert m["env_steps"] == 256 and m["weight_version"] == 2
    from tests.support.cluster import alive_actor_classes

    before = alive_actor_classes()
    parts.engine.close()
    import time

    deadline = time.time() + 30
    while len(alive_actor_classes()) >= len(before) and time.time() < deadline:
        time.sleep(0.2)
    assert len(alive_actor_classes()) < len(before)


def test_anneal_clip_alone_gets_the_schedule(tmp_path, build):
    """policy.anneal_clip without optim.anneal_lr: the engine still tells the policy the run's length."""
    from rlightning.utils.config import apply_overrides

    cfg = apply_overrides(
        small_ppo(tmp_path), ["train.iterations=4", "policy.anneal_clip=true", "policy.optim.anneal_lr=false"]
    )
    e = build(cfg).engine
    clips = [m["clip_coef"] for m in e.run(iterations=3)]
    assert clips == pytest.approx([0.2, 0.15, 0.1])
    assert {m["lr"] for m in e.run(iterations=1)} == {cfg.policy.optim.lr}


def test_anneal_lr_reaches_zero_at_the_env_step_budget(tmp_path, build):
    """A run ended by ``train.total_env_steps`` (1024 = 4 rollouts of 256) long before ``train.iterations``:
    the learning rate anneals over the budget, not over the 1000 iterations that never run."""
    from rlightning.utils.config import apply_overrides

    cfg = apply_overrides(small_ppo(tmp_path), ["train.iterations=1000", "train.total_env_steps=1024"])
    e = build(cfg).engine
    history = e.run()
    assert [m["env_steps"] for m in history] == [256, 512, 768, 1024]
    lr = cfg.policy.optim.lr
    assert [m["lr"] for m in history] == pytest.approx([0.75 * lr, 0.5 * lr, 0.25 * lr, 0.0])
