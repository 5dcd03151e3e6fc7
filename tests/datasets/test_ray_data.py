"""Ray Data: BufferView round trip, a Minari dataset read by Ray Data tasks, and the offline engine's sharding."""

from __future__ import annotations

import pytest
import torch

from rlightning import datasets
from rlightning.buffer.utils import BufferView
from rlightning.datasets.ray_data import minari_ray_dataset
from rlightning.utils.builders import build_run
from rlightning.utils.config import config_from_dict

pytestmark = pytest.mark.ray


def test_a_bufferview_goes_through_ray_data_and_back(ray_runtime, pendulum_random_dataset):
    view = datasets.load(pendulum_random_dataset)
    data = view.to_tensordict()
    data.set("row", torch.arange(len(view)))
    data.set(("nested", "x"), torch.randn(len(view), 2))
    ds = BufferView(data).to_ray_dataset(num_blocks=3)
    assert "nested.x" in ds.columns()
    back = BufferView.from_ray_dataset(ds)
    assert len(back) == 800
    order = back["row"].argsort()
    for key in ("obs", "action", "reward", "next_obs", "terminated", "done", "episode", ("nested", "x")):
        assert torch.equal(back.to_tensordict().get(key)[order], data.get(key)), key
    with pytest.raises(TypeError, match="from_ray_dataset takes a ray.data.Dataset, got list"):
        BufferView.from_ray_dataset([1, 2])


def test_the_offline_engine_shards_a_ray_dataset_over_two_train_workers(ray_runtime, cartpole_expert_dataset, tmp_path):
    # 10,000 transitions split over 2 remote train workers: each reads its half (in batches of 512), none all of it
    cfg = config_from_dict(
        {
            "engine": "offline",
            "env": {"name": "CartPole-v1", "num_envs": 2},
            "policy": {"type": "bc", "hidden_sizes": [16]},
            "buffer": {"type": "replay", "capacity": 1_000},  # smaller than the dataset: streamed, not loaded
            "train": {
                "dataset": str(cartpole_expert_dataset),
                "dataset_stream": True,
                "batch_size": 512,
                "iterations": 3,
                "updates_per_iteration": 4,  # 12 batches per worker: its 9 of the first epoch, then a second
            },
            "cluster": {"train_worker_num": 2, "remote_train": True, "buffer_worker_num": 2},
            "log": {"progress": False, "run_dir": str(tmp_path)},
        }
    )
    parts = build_run(cfg)
    try:
        history = parts.engine.run()
        reports = parts.engine.stream_reports
    finally:
        parts.engine.close()
    assert history[-1]["gradient_steps"] == 12 and history[-1]["bc_loss"] < history[0]["bc_loss"]
    assert parts.buffer.size == 0  # nothing went through the buffer
    total, share = 10_000, 5_000
    for report in reports:
        assert report["rows_read"] == 12 * 512 and report["epochs"] == 2
        first = report["epoch_rows"][0]
        assert share - 512 <= first <= share  # its half of the epoch (less a last partial batch), no more
    # the two halves of the first epoch together cover the dataset: they do not overlap
    assert sum(r["epoch_rows"][0] for r in reports) >= total - 2 * 512
    with pytest.raises(FileNotFoundError, match="no dataset at"):
        minari_ray_dataset(tmp_path / "nothing")
