"""Sequence windows of stored episodes: slices with a burn-in, through a storage and the buffer config."""

import numpy as np
import pytest
import torch

from rlightning.buffer.utils.sequences import episode_windows
from rlightning.buffer.utils.storage import Storage
from rlightning.utils.config import ConfigError, apply_overrides, load_preset
from rlightning.utils.validate import validate_config


def _episode(length, start):
    steps = np.arange(length)
    return {
        "obs": (start + steps).astype(np.float32)[:, None],
        "next_obs": (start + steps + 1).astype(np.float32)[:, None],
        "action": np.zeros(length, np.int64),
        "reward": np.ones(length, np.float32),
        "terminated": steps == length - 1,
        "truncated": np.zeros(length, bool),
    }


def test_windows_without_burn_in_are_the_plain_slices():
    start, length = torch.tensor([0, 10, 30]), torch.tensor([10, 20, 3])
    gen = torch.Generator().manual_seed(0)
    rows, mask, burn = episode_windows(start, length, 100, 5, 0, gen)
    assert rows.shape == (3, 5) and burn is None
    assert mask.sum(1).tolist() == [5, 5, 3]
    assert (rows[2] == torch.tensor([30, 31, 32, 32, 32])).all()  # padding repeats the last step


def test_burn_in_precedes_each_slice_and_is_shorter_near_the_episode_start():
    start, length = torch.zeros(400, dtype=torch.long), torch.full((400,), 50)
    rows, mask, burn = episode_windows(start, length, 1000, 10, 4, torch.Generator().manual_seed(1))
    assert rows.shape == (400, 14)
    assert (mask.sum(1) == 10).all()
    assert not (mask & burn).any()
    first_learn = mask.float().argmax(1)
    offset = rows[torch.arange(400), first_learn]  # the episode step the slice starts at
    assert (burn.sum(1) == offset.clamp(max=4)).all()  # at most 4 steps before it, fewer near the start
    assert (rows[:, 0] == (offset - 4).clamp(min=0)).all()  # windows start where the burn-in does
    for b in range(400):  # consecutive steps: burn-in then slice
        n = int(burn[b].sum()) + 10
        assert (rows[b, 1:n] - rows[b, : n - 1] == 1).all()
    assert (offset < 4).any() and (offset >= 4).any()


def test_storage_samples_burn_in_windows_and_checks_its_settings():
    st = Storage(20, "circular", "episode", [], "cpu", slice_len=3, burn_in=2, seed=0)
    for i in range(18):
        st.add_episode(_episode(4 + i % 5, 100 * i))
    batch = st.sample(16)
    assert tuple(batch.batch_size) == (16, 5)
    assert batch["burn_in"].dtype == torch.bool and (batch["mask"].sum(1) == 3).all()
    obs = batch["obs"][..., 0]
    for b in range(16):
        n = int(batch["burn_in"][b].sum()) + 3
        assert (obs[b, 1:n] - obs[b, : n - 1] == 1).all()  # one stretch of one episode
    with pytest.raises(ValueError, match="needs unit='episode' and a slice_len"):
        Storage(20, "circular", "episode", [], "cpu", burn_in=2)
    with pytest.raises(ValueError, match="burn_in must be an integer >= 0"):
        Storage(20, "circular", "episode", [], "cpu", slice_len=3, burn_in=-1)
    cfg = apply_overrides(load_preset("lstm_ppo"), ["buffer.burn_in=8"])
    with pytest.raises(ConfigError, match="buffer.burn_in=8 .* needs buffer.unit='episode' and a buffer.slice_len"):
        validate_config(cfg)
