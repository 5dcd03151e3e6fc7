"""Minari datasets in and out: round trips read back with ``minari`` itself, atomic writes, every bad input."""

from __future__ import annotations

import os
import shutil

import gymnasium as gym
import minari
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning import datasets
from rlightning.buffer import DataBuffer
from rlightning.buffer.utils import BufferView
from rlightning.datasets.collect import collect_episodes
from rlightning.datasets.episodes import episodes_to_transitions, split_episodes, transitions_of
from rlightning.types import EnvMeta
from rlightning.utils.config import BufferConfig

PENDULUM = gym.make("Pendulum-v1")


def _replay_buffer(rows: TensorDict) -> DataBuffer:
    buffer = DataBuffer(BufferConfig(type="replay", capacity=10_000), remote=False)
    buffer.init([EnvMeta("env-0", PENDULUM.action_space, PENDULUM.observation_space, 1)])
    buffer.extend(rows)
    return buffer


def test_a_replay_buffer_written_as_a_minari_dataset_reads_back_with_minari(tmp_path):
    episodes = collect_episodes(None, "Pendulum-v1", 3, seed=3)
    rows = episodes_to_transitions(episodes).exclude("episode")
    buffer = _replay_buffer(rows)
    info = datasets.write(buffer, tmp_path / "replay", env="Pendulum-v1", ref_max_score=-150.0, ref_episodes=2)

    read = minari.MinariDataset(tmp_path / "replay" / "data")  # minari itself
    assert read.total_episodes == 3 and read.total_steps == 600
    for ours, theirs in zip(episodes, read.iterate_episodes()):
        np.testing.assert_allclose(theirs.rewards, ours.rewards, rtol=1e-6)
        np.testing.assert_allclose(theirs.observations, ours.observations, rtol=1e-6)
        np.testing.assert_allclose(theirs.actions, ours.actions, rtol=1e-6)
        assert theirs.truncations[-1] and not theirs.terminations.any()
    assert read.env_spec.id == "Pendulum-v1"
    # the reference returns Minari's normalised score reads, and ours agree
    ret = np.array([-150.0, info.ref_min_score, -600.0])
    np.testing.assert_allclose(minari.get_normalized_score(read, ret) * 100, info.normalized_score(ret))
    assert info.normalized_score(-150.0) == pytest.approx(100.0)
    assert info.return_mean == pytest.approx(np.mean([e.episode_return for e in episodes]))

    view = datasets.load(tmp_path / "replay", env="Pendulum-v1")
    assert isinstance(view, BufferView) and len(view) == 600
    assert torch.equal(view["episode"], torch.arange(3).repeat_interleave(200))
    assert torch.equal(view["done"].nonzero().squeeze(1), torch.tensor([199, 399, 599]))
    assert torch.allclose(view["obs"], rows["obs"]) and torch.allclose(view["reward"], rows["reward"])

    into = DataBuffer(BufferConfig(type="replay", capacity=1_000), remote=False)
    into.init([EnvMeta("env-0", PENDULUM.action_space, PENDULUM.observation_space, 1)])
    assert datasets.load(tmp_path / "replay", into=into).size == 600
    assert into.sample(32)[0]["obs"].shape == (32, 3)


def test_a_minari_id_lives_in_minaris_root_and_a_bufferview_writes_too(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    view = BufferView(episodes_to_transitions(collect_episodes(None, "CartPole-v1", 2, seed=0)))
    datasets.write(view, "cartpole/random-v0", env="CartPole-v1", ref_episodes=0)
    assert minari.load_dataset("cartpole/random-v0").total_steps == len(view)
    assert "cartpole/random-v0" in minari.list_local_datasets()
    back = datasets.load("cartpole/random-v0")
    assert torch.equal(back["action"], view["action"]) and back["action"].dtype == torch.int64


def test_episodes_are_found_again_where_rows_stop_continuing():
    episodes = collect_episodes(None, "Pendulum-v1", 2, seed=5)
    rows = transitions_of(episodes_to_transitions(episodes), "rows")
    rows["done"][:] = False  # a buffer's open segments: no flag, but the next row does not continue the last
    rows["truncated"][:] = False
    found = split_episodes(rows)
    assert [len(e) for e in found] == [200, 200]
    assert all(e.truncations[-1] and not e.truncations[:-1].any() for e in found)
    np.testing.assert_allclose(found[1].observations, episodes[1].observations)


def test_a_write_is_complete_or_absent(tmp_path, monkeypatch):
    episodes = collect_episodes(None, "Pendulum-v1", 2, seed=0)
    target = tmp_path / "ds"
    datasets.write(episodes[:1], target, env="Pendulum-v1", ref_episodes=0)
    before = sorted(p.name for p in target.rglob("*"))

    import minari.dataset._storages.arrow_storage as arrow

    def broken(self, episodes):
        raise OSError("disk full")

    monkeypatch.setattr(arrow.ArrowStorage, "update_episodes", broken)
    with pytest.raises(OSError, match="disk full"):
        datasets.write(episodes, target, env="Pendulum-v1", ref_episodes=0, overwrite=True)
    with pytest.raises(OSError, match="disk full"):
        datasets.write(episodes, tmp_path / "new", env="Pendulum-v1", ref_episodes=0)
    assert sorted(p.name for p in target.rglob("*")) == before  # the old dataset as it was
    assert not (tmp_path / "new").exists()
    assert sorted(os.listdir(tmp_path)) == ["ds"]  # no temporary folder left
    monkeypatch.undo()
    with pytest.raises(FileExistsError, match="already; pass overwrite=True"):
        datasets.write(episodes, target, env="Pendulum-v1", ref_episodes=0)
    datasets.write(episodes, target, env="Pendulum-v1", ref_episodes=0, overwrite=True)
    assert datasets.info(target).total_episodes == 2


def test_missing_and_corrupt_datasets_are_named(tmp_path, pendulum_random_dataset):
    with pytest.raises(FileNotFoundError, match="no dataset at .*nothing.*does not exist"):
        datasets.load(tmp_path / "nothing")
    (tmp_path / "folder").mkdir()
    with pytest.raises(FileNotFoundError, match="has no data/metadata.json"):
        datasets.load(tmp_path / "folder")
    with pytest.raises(FileNotFoundError, match="Dataset nothing/here-v0 not found locally"):
        minari.load_dataset("nothing/here-v0")  # what minari says; ours:
    with pytest.raises(FileNotFoundError, match="no dataset at"):
        datasets.load("nothing/here-v0")

    bad_meta = tmp_path / "bad_meta"
    shutil.copytree(pendulum_random_dataset, bad_meta)
    (bad_meta / "data" / "metadata.json").write_text("{not json")
    with pytest.raises(ValueError, match="is corrupt: its metadata cannot be read"):
        datasets.load(bad_meta)

    lost = tmp_path / "lost_episode"
    shutil.copytree(pendulum_random_dataset, lost)
    shutil.rmtree(lost / "data" / "2")
    with pytest.raises(ValueError, match="is corrupt: its episodes cannot be read"):
        datasets.load(lost)

    cut = tmp_path / "cut_file"
    shutil.copytree(pendulum_random_dataset, cut)
    part = cut / "data" / "1" / "part-0.arrow"
    part.write_bytes(part.read_bytes()[:100])  # a file cut short
    with pytest.raises(ValueError, match="is corrupt: its episodes cannot be read"):
        datasets.load(cut)


def test_nan_rewards_empty_data_and_spaces_that_do_not_fit(tmp_path, pendulum_random_dataset):
    episodes = collect_episodes(None, "Pendulum-v1", 2, seed=0)
    episodes[1].rewards[17] = np.nan
    with pytest.raises(ValueError, match="episode 1 has a NaN or infinite reward at step 17"):
        datasets.write(episodes, tmp_path / "nan", env="Pendulum-v1", ref_episodes=0)
    assert not (tmp_path / "nan").exists()

    # a dataset written by someone else (through minari's storage, without our check): refused on load
    from minari.data_collector.episode_buffer import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage

    (tmp_path / "theirs" / "data").mkdir(parents=True)
    storage = MinariStorage.new(
        tmp_path / "theirs" / "data", PENDULUM.observation_space, PENDULUM.action_space, data_format="arrow"
    )
    storage.update_metadata({"dataset_id": "theirs-v0", "minari_version": minari.__version__})
    ep = episodes[1]
    storage.update_episodes(
        [
            EpisodeBuffer(
                id=0,
                observations=ep.observations,
                actions=ep.actions,
                rewards=ep.rewards,
                terminations=ep.terminations,
                truncations=ep.truncations,
            )
        ]
    )
    with pytest.raises(ValueError, match="'theirs-v0': episode 0 has a NaN or infinite reward at step 17"):
        datasets.load(tmp_path / "theirs")

    with pytest.raises(ValueError, match="nothing to write .* holds no episodes"):
        datasets.write([], tmp_path / "empty", env="Pendulum-v1")
    with pytest.raises(ValueError, match="is empty: no transitions to write"):
        datasets.write(
            TensorDict(
                {k: torch.zeros(0) for k in ("obs", "action", "reward", "next_obs", "terminated")}, batch_size=[0]
            ),
            tmp_path / "empty",
            env="Pendulum-v1",
        )
    with pytest.raises(KeyError, match=r"missing transition keys \['next_obs'\]"):
        datasets.write(
            TensorDict({k: torch.zeros(3) for k in ("obs", "action", "reward", "terminated")}, batch_size=[3]),
            tmp_path / "empty",
            env="Pendulum-v1",
        )

    (tmp_path / "zero" / "data").mkdir(parents=True)
    storage = MinariStorage.new(
        tmp_path / "zero" / "data", PENDULUM.observation_space, PENDULUM.action_space, data_format="arrow"
    )
    storage.update_metadata({"dataset_id": "zero-v0", "minari_version": minari.__version__})
    with pytest.raises(ValueError, match="is empty: it holds no episodes"):
        datasets.load(tmp_path / "zero")

    with pytest.raises(ValueError, match=r"has observation space Box\(.*\(3,\).*but the env has Box\(.*\(4,\)"):
        datasets.load(pendulum_random_dataset, env="CartPole-v1")
    cartpole = collect_episodes(None, "CartPole-v1", 1, seed=0)
    with pytest.raises(ValueError, match=r"episode 0: observations have shape \(4,\); the space Box.* has \(3,\)"):
        datasets.write(cartpole, tmp_path / "mismatch", env="Pendulum-v1", ref_episodes=0)
