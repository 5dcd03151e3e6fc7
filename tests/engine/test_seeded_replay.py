"""A seeded off-policy run repeats exactly: what it stores, what its buffer samples, what it learns (issue 20)."""

import pytest
import torch


@pytest.mark.parametrize("preset", ["cartpole_rainbow", "cartpole_dqn"])
def test_a_seeded_replay_run_stores_samples_and_learns_the_same_twice(tmp_path, build, preset):
    """cartpole_rainbow's prioritized sampler (and cartpole_dqn's uniform one) draw from the run's seed."""
    from rlightning.utils.config import apply_overrides, load_preset

    seen = []
    for run in range(2):
        cfg = apply_overrides(
            load_preset(preset),
            [
                "log.progress=false",
                f"log.run_dir={tmp_path / str(run)}",
                "train.rollout_steps=160",
                "train.learning_starts=128",
                "train.updates_per_iteration=3",
                "seed=4",
            ],
        )
        assert cfg.buffer.seed is None
        engine = build(cfg).engine
        engine.step()
        engine.step()  # the second iteration samples with the priorities the first one wrote back
        data = engine.buffer.get_data()
        (batch,) = engine.buffer.sample(32)
        weights = engine.policy_group.train_workers[0].worker.modules["q"].state_dict()
        seen.append(
            {
                "stored": data["obs"].clone(),
                "sampled": batch["obs"].clone(),
                "index": batch.get("_index", torch.zeros(0)).clone(),
                "weights": [w.clone() for w in weights.values()],
            }
        )
        engine.close()
    first, second = seen
    assert first["stored"].shape[0] > 250  # n-step: the steps of episodes in progress wait
    for key in ("stored", "sampled", "index"):
        assert torch.equal(first[key], second[key]), key
    assert all(torch.equal(a, b) for a, b in zip(first["weights"], second["weights"]))
