import pytest

from rlightning.engine import AsyncRLEngine
from tests.support.configs import small_sac


def _async(tmp_path, remote=False, *extra):
    return small_sac(tmp_path, remote, "engine=asyncrl", "train.updates_per_iteration=2", *extra)


def test_async_overlaps_rollout_and_records_policy_lag(tmp_path, build):
    e = build(_async(tmp_path)).engine
    assert isinstance(e, AsyncRLEngine) and not e.on_policy
    history = e.run(iterations=4)
    assert len(history) == 4
    trained = [m for m in history if "q_loss" in m]
    assert trained, "SAC never trained after learning_starts"
    assert all("policy_lag" in m and m["policy_lag"] >= 0 for m in history)
    assert e.env_steps >= 4 * 16 * 2
    assert e.buffer.stats()["size"] > 0
    rec = e.timing.records[-1]
    assert rec.get("train", 0) > 0 and "rollout" in rec


def _lags(history):
    return [m["policy_lag_max"] for m in history if "policy_lag_max" in m]


def test_policy_lag_counts_learner_updates_the_acting_weights_miss(tmp_path, build):
    e = build(_async(tmp_path, False, "train.updates_per_iteration=16", "train.max_policy_lag=1000")).engine
    history = e.run(iterations=6)
    lags = _lags(history)
    assert lags and max(lags) >= 1, f"actions taken while the learner trained should lag: {lags}"
    assert max(lags) <= 16, f"a sync every iteration bounds the lag by updates_per_iteration: {lags}"
    assert e.acting_lag == 0 and e._updates == 16 * sum("q_loss" in m for m in history)
    e.close()


@pytest.mark.parametrize("bound", [0, 2])
def test_max_policy_lag_holds_the_rollout_thread_until_a_sync(tmp_path, build, bound):
    e = build(_async(tmp_path, False, "train.updates_per_iteration=12", f"train.max_policy_lag={bound}")).engine
    history = e.run(iterations=5)
    assert any("q_loss" in m for m in history)
    lags = _lags(history)
    assert lags and max(lags) <= bound, f"max_policy_lag={bound} but actions lagged {lags}"
    for _ in range(bound + 3):  # updates outside step(): the next rollout syncs before it waits
        e.update_dataset()
        e.train()
    assert e.acting_lag == bound + 3
    assert e.rollout()["rollout_env_steps"] >= e._chunk and e.acting_lag == 0
    e.close()


def test_without_eval_workers_the_learner_acts_and_nothing_lags(tmp_path, build):
    e = build(_async(tmp_path, False, "cluster.eval_worker_num=0", "train.max_policy_lag=0")).engine
    assert e._learner_acts and not e.policy_group.eval_workers
    history = e.run(iterations=4)
    assert any("q_loss" in m for m in history)
    assert set(_lags(history)) == {0}, "the learner's own weights acted: no lag"
    e.close()


def test_async_thread_is_bounded_and_stops(tmp_path, build):
    e = build(_async(tmp_path)).engine
    e.step()
    produced = e._produced
    import time

    time.sleep(1.0)
    # at most two chunks are collected ahead of the learner
    assert e._produced - e._consumed <= 2 * e._chunk + e.num_sub_envs
    assert e._produced >= produced
    e.close()
    assert e._thread is None


def test_sync_sac_trains_several_rounds(tmp_path, build):
    e = build(small_sac(tmp_path, False, "train.updates_per_iteration=3")).engine
    assert not e.on_policy
    m = e.run(iterations=4)[-1]
    assert "q_loss" in m and "alpha" in m


@pytest.mark.ray
def test_async_on_ray_workers(tmp_path, build, ray_runtime, remote_flags):
    e = build(_async(tmp_path, True)).engine
    history = e.run(iterations=3)
    assert len(history) == 3 and any("q_loss" in m for m in history)
