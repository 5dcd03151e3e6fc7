"""The off-policy train phase: an iteration's uniform batches drawn and trained in one call each (issue 17)."""

import functools
from types import SimpleNamespace

import pytest
import torch

from rlightning.engine.asyncrl import AsyncRLEngine


def counting(engine):
    """Count the engine's buffer samples and the rows each drew."""
    calls = []
    original = engine.buffer.sample

    @functools.wraps(original)
    def sample(*args, **kwargs):
        out = original(*args, **kwargs)
        calls.append(sum(len(b) for b in out))
        return out

    engine.buffer.sample = sample
    return calls


def short_run(build, tmp_path, preset, name, *extra):
    from rlightning.utils.config import apply_overrides, load_preset

    cfg = apply_overrides(
        load_preset(preset),
        [
            "log.progress=false",
            f"log.run_dir={tmp_path / name}",
            "train.rollout_steps=160",
            "train.learning_starts=128",
            "train.updates_per_iteration=8",
            "seed=4",
            *extra,
        ],
    )
    engine = build(cfg).engine
    calls = counting(engine)
    metrics = [engine.step(), engine.step()]
    data = engine.buffer.get_data()
    learner = engine.policy_group.train_workers[0]
    weights = [] if learner.is_remote else [w.clone() for w in learner.worker.modules["q"].state_dict().values()]
    engine.close()
    return {"calls": calls, "metrics": metrics, "stored": data["obs"].clone(), "weights": weights}


def test_uniform_batches_are_drawn_and_trained_at_once_with_the_same_learning(tmp_path, build):
    batched = short_run(build, tmp_path, "cartpole_dqn", "batched")
    stepwise = short_run(build, tmp_path, "cartpole_dqn", "stepwise", "train.batched_updates=false")
    assert batched["calls"] == [8 * 64, 8 * 64]  # one sample of 8 batches per iteration
    assert stepwise["calls"] == [64] * 16
    # One draw of 8 x 64 slots from the buffer's seeded generator is the 8 draws of 64: the same batches,
    # the same updates (TD targets of all rows in one forward: equal up to float rounding).
    assert torch.equal(batched["stored"], stepwise["stored"])
    for a, b in zip(batched["weights"], stepwise["weights"]):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
    for key in ("q_loss", "q_value"):
        assert batched["metrics"][-1][key] == pytest.approx(stepwise["metrics"][-1][key], rel=1e-4, abs=1e-5)


def test_prioritized_replay_samples_once_per_update(tmp_path, build):
    run = short_run(build, tmp_path, "cartpole_rainbow", "rainbow")
    assert run["calls"] == [64] * 16  # each draw sees the priorities written back before it


@pytest.mark.ray
def test_remote_train_workers_and_storage_train_the_batches_at_once(tmp_path, build, ray_runtime):
    run = short_run(
        build,
        tmp_path,
        "cartpole_dqn",
        "remote",
        "cluster.remote_train=true",
        "cluster.remote_storage=true",
        "train.updates_per_iteration=4",
    )
    assert run["calls"] == [4 * 64, 4 * 64]
    assert all(m["q_loss"] >= 0 for m in run["metrics"])


@pytest.mark.parametrize(
    ("lag", "learner_acts", "remaining", "chunk"),
    [
        (0, False, 64, 4),  # up to the bound of 4 updates behind, in one call
        (3, False, 64, 1),
        (4, False, 64, 1),  # at the bound: one update crosses it, the rollout thread then waits for the sync
        (5, False, 60, 60),  # over the bound: the thread waits anyway, the rest in one call
        (0, False, 2, 2),
        (0, True, 64, 64),  # the learner acts itself: nothing lags
    ],
)
def test_asyncrl_calls_keep_the_policy_lag_bound(lag, learner_acts, remaining, chunk):
    engine = SimpleNamespace(acting_lag=lag, _learner_acts=learner_acts, _max_lag=4)
    assert AsyncRLEngine.minibatch_chunk(engine, remaining) == chunk


class _Buffer:
    def sample(self, batch_size, num_batches=1):
        return []


class _OneBatchBuffer:
    def sample(self, batch_size):
        return []


def test_minibatch_calls_possible_is_kept_until_the_buffer_or_its_sample_changes():
    from rlightning.engine.train_rounds import TrainRounds
    from rlightning.utils.config import load_preset

    cfg = load_preset("acrobot_dqn")
    engine = SimpleNamespace(
        config=cfg, on_policy=False, buffer=_Buffer(), policy_group=SimpleNamespace(train_minibatches=None)
    )
    minibatch_calls_possible = TrainRounds(engine).minibatch_calls_possible
    assert minibatch_calls_possible() is True
    assert minibatch_calls_possible() is True  # the kept answer
    engine.buffer.sample = lambda batch_size: []  # an instance override without num_batches
    assert minibatch_calls_possible() is False
    engine.buffer = _Buffer()
    assert minibatch_calls_possible() is True
    engine.buffer = _OneBatchBuffer()
    assert minibatch_calls_possible() is False
    engine.buffer = _Buffer()
    cfg.train.batched_updates = False  # read every call
    assert minibatch_calls_possible() is False
    cfg.train.batched_updates = True
    cfg.buffer.sampler = "prioritized"
    assert minibatch_calls_possible() is False
