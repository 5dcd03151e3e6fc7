"""APPO on the asyncrl engine: actors run ahead on stale weights, each row carries the weight version that
acted, and the learner reports every batch's policy lag."""

import pytest

from rlightning.engine import AsyncRLEngine
from rlightning.policy.algorithms.appo import POLICY_VERSION
from rlightning.utils.config import apply_overrides, load_preset
from tests.support.configs import LOCAL


def small_appo(tmp_path, *extra):
    return apply_overrides(
        load_preset("cartpole_appo"),
        [
            "env.num_workers=1",
            "env.num_envs=4",
            "train.rollout_steps=16",
            "policy.update_epochs=1",
            "policy.num_minibatches=1",
            "train.target_return=null",
            "log.progress=false",
            f"log.run_dir={tmp_path}",
            *LOCAL,
            *extra,
        ],
    )


@pytest.mark.parametrize("inference", ["env_workers", "eval_workers"])
def test_rows_carry_the_acting_version_and_batches_report_their_lag(tmp_path, build, inference):
    e = build(small_appo(tmp_path, f"cluster.inference={inference}")).engine
    assert isinstance(e, AsyncRLEngine) and e.on_policy
    history = e.run(iterations=4)
    assert len(history) == 4 and all("policy_loss" in m for m in history)
    lags = [m["batch_policy_lag_max"] for m in history]
    assert all(0 <= m["batch_policy_lag"] <= m["batch_policy_lag_max"] for m in history)
    assert max(lags) >= 1, f"the actors ran ahead of the learner, some rows should lag: {lags}"
    # what is stored now was acted by versions up to the learner's; every row says which
    e.rollout()
    with e._lock:
        data = e.buffer.get_data()
    versions = data.get(POLICY_VERSION)
    assert versions.numel() > 0 and int(versions.max()) <= e.policy_group.weight_version
    assert int(versions.min()) >= e.policy_group.weight_version - 3
    assert e.env_steps >= 4 * 16 * 4


def test_ppo_is_refused_on_stale_weights(tmp_path, build):
    with pytest.raises(ValueError, match="'ppo' does not correct for"):
        build(small_appo(tmp_path, "policy.type=ppo"))


def test_minatar_appo_trains_its_cnn_on_stale_pixel_batches(tmp_path, build):
    # The pixel APPO preset: the MinAtar CNN acting in the env workers, V-trace batches of bool frames.
    pytest.importorskip("minatar", reason="the minatar suite (pip install 'rlightning[minatar]')")
    cfg = apply_overrides(
        load_preset("minatar_appo"),
        ["train.rollout_steps=8", "policy.update_epochs=1", "log.progress=false", f"log.run_dir={tmp_path}"],
    )
    e = build(cfg).engine
    before = {k: v.clone() for k, v in e.policy_group.train_workers[0].worker.encoder.state_dict().items()}
    history = e.run(iterations=3)
    assert len(history) == 3 and all(m["policy_loss"] == m["policy_loss"] for m in history)  # finite, not NaN
    assert all(0 <= m["batch_policy_lag"] <= m["batch_policy_lag_max"] for m in history)
    after = e.policy_group.train_workers[0].worker.encoder.state_dict()
    assert any(not after[k].equal(v) for k, v in before.items()), "the CNN encoder never learned"
    with e._lock:
        obs = e.buffer.get_data().get("obs")
    assert obs.shape[-3:] == (10, 10, 4)
