"""SAC with gSDE in the engine (mountaincar_sac), and train.store_open_episodes."""

import pytest
import torch

from rlightning.utils.config import apply_overrides, load_preset


def _cfg(tmp_path, *extra):
    return apply_overrides(
        load_preset("mountaincar_sac"),
        [
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={tmp_path}",
            "train.batch_size=16",
            "train.updates_per_iteration=2",
            *extra,
        ],
    )


@pytest.mark.parametrize("store_open", [False, True])
def test_store_open_episodes_stores_the_running_episodes_at_each_rollout_end(tmp_path, build, store_open):
    engine = build(_cfg(tmp_path, f"train.store_open_episodes={str(store_open).lower()}")).engine
    for i in range(2):
        engine.step()
        # MountainCarContinuous episodes run 999 steps: none has ended yet
        assert int(engine.buffer.size) == (32 * (i + 1) if store_open else 0)
    if store_open:
        data = engine.buffer.get_data()
        assert not data["terminated"].any()
        # the second rollout continues the first one's episode: step 31's next obs is step 32's obs
        torch.testing.assert_close(data["next_obs"][31], data["obs"][32])


def _log_std(worker):
    return torch.as_tensor(worker.call("get_weights")["actor.noise.log_std"])


def test_gsde_trains_syncs_and_round_trips_through_an_engine_checkpoint(tmp_path, build):
    engine = build(_cfg(tmp_path / "a", "train.store_open_episodes=true")).engine
    for _ in range(3):
        metrics = engine.step()
    assert metrics["env_steps"] == 96
    train, acting = engine.policy_group.train_workers[0], engine.policy_group.eval_workers[0]
    trained = _log_std(train)
    assert not torch.allclose(trained, torch.full_like(trained, -3.67))
    torch.testing.assert_close(_log_std(acting), trained)
    path = engine.save(tmp_path / "ckpt")
    other = build(_cfg(tmp_path / "b", "train.store_open_episodes=true")).engine
    other.load(str(path))
    torch.testing.assert_close(_log_std(other.policy_group.train_workers[0]), trained)
    torch.testing.assert_close(_log_std(other.policy_group.eval_workers[0]), trained)
