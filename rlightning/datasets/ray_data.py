"""Ray Data for datasets larger than memory or spread over nodes.

    ds = view_to_ray_dataset(view)                  # BufferView.to_ray_dataset(): one row per transition
    view = ray_dataset_to_view(ds)                  # BufferView.from_ray_dataset(ds): back, in this process
    ds = minari_ray_dataset("runs/data/medium")     # a Minari dataset read lazily by Ray Data tasks
    shards = ds.streaming_split(2, equal=True)      # one DataIterator per train worker
    reader = ShardReader(shards[0], batch_size=256) # lives in the train worker: next_batches(k) -> TensorDict

`minari_ray_dataset` reads the episodes inside Ray Data's read tasks (``map_batches`` over episode
indices), wherever Ray runs them; with `ShardReader` in each train worker over its part of a
``streaming_split``, no process holds the whole dataset: the driver never reads a row, and each worker
reads only its share of each epoch. Rows carry ``episode`` and ``step`` (the step within its episode), so
what each worker read can be told apart (`ShardReader.report`).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Union

import numpy as np
import torch
from tensordict import TensorDict

__all__ = ["ShardReader", "minari_ray_dataset", "ray_dataset_to_view", "view_to_ray_dataset"]


def _table(columns: Dict[str, np.ndarray]) -> Any:
    """A pyarrow table of numpy columns; columns of more than one dim as Ray's tensor extension arrays."""
    import pyarrow as pa
    from ray.data.extensions import ArrowTensorArray

    arrays, names = [], []
    for key, value in columns.items():
        value = np.ascontiguousarray(value)
        arrays.append(ArrowTensorArray.from_numpy(value) if value.ndim > 1 else pa.array(value))
        names.append(key)
    return pa.Table.from_arrays(arrays, names=names)


def view_to_ray_dataset(view: Any, num_blocks: Optional[int] = None) -> Any:
    """A Ray Dataset of a `BufferView`'s rows (one column per key; nested keys joined with dots).

    Args:
        view: The `BufferView`.
        num_blocks: Blocks to split the rows into (None: about one per 4096 rows, at most 64).

    Raises:
        ValueError: an empty view.
    """
    import ray

    data = view.to_tensordict()
    n = len(view)
    if n == 0:
        raise ValueError("to_ray_dataset: the BufferView is empty")
    columns = {".".join(k) if isinstance(k, tuple) else k: v.numpy() for k, v in data.items(True, True)}
    blocks = num_blocks or max(1, min(64, n // 4096))
    bounds = np.linspace(0, n, blocks + 1).astype(int)
    tables = [_table({k: v[lo:hi] for k, v in columns.items()}) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]
    return ray.data.from_arrow(tables)


def _batch_to_tensordict(batch: Dict[str, np.ndarray]) -> TensorDict:
    n = len(next(iter(batch.values()))) if batch else 0
    out = TensorDict({}, batch_size=[n])
    for key, value in batch.items():
        tensor = torch.as_tensor(np.array(value))  # a copy: Ray hands out read-only arrays
        out.set(tuple(key.split(".")) if "." in key else key, tensor)
    return out


def ray_dataset_to_view(ds: Any) -> Any:
    """A `BufferView` of every row of a Ray Dataset (read into this process).

    Raises:
        TypeError: not a Ray Dataset.
        ValueError: an empty dataset.
    """
    import ray

    from rlightning.buffer.utils import BufferView

    if not isinstance(ds, ray.data.Dataset):
        raise TypeError(f"from_ray_dataset takes a ray.data.Dataset, got {type(ds).__name__}")
    parts = [_batch_to_tensordict(b) for b in ds.iter_batches(batch_size=None, batch_format="numpy")]
    parts = [p for p in parts if p.batch_size[0] > 0]
    if not parts:
        raise ValueError("from_ray_dataset: the Ray Dataset has no rows")
    return BufferView(torch.cat(parts, 0))


def _read_episodes(batch: Dict[str, np.ndarray], path: str) -> Dict[str, np.ndarray]:
    """A Ray Data map: episode indices -> their transitions (read from the Minari dataset where this runs)."""
    from rlightning.datasets.episodes import episodes_to_transitions
    from rlightning.datasets.minari_io import read_episode_range

    indices = [int(i) for i in batch["episode"]]
    episodes = read_episode_range(path, indices)
    rows = episodes_to_transitions(episodes)
    out = {k: v.numpy() for k, v in rows.items() if k != "episode"}
    out["episode"] = np.repeat(np.asarray(indices, dtype=np.int64), [len(e) for e in episodes])
    out["step"] = np.concatenate([np.arange(len(e), dtype=np.int64) for e in episodes])
    return out


def minari_ray_dataset(path_or_id: Union[str, os.PathLike], episodes_per_block: int = 8, shuffle: bool = True) -> Any:
    """A Ray Dataset of a Minari dataset's transitions, read lazily by Ray Data tasks (never by the caller).

    Args:
        path_or_id: The dataset (see `rlightning.datasets.load`).
        episodes_per_block: Episodes each read task reads.
        shuffle: Randomise the order of the episode blocks (each epoch).

    Raises:
        FileNotFoundError, ValueError: as `rlightning.datasets.info` (missing, corrupt, empty).
    """
    import ray

    from rlightning.datasets.minari_io import info

    meta = info(path_or_id)
    if meta.total_episodes == 0:
        raise ValueError(f"dataset {meta.dataset_id!r} at {str(meta.path)!r} is empty: it holds no episodes")
    blocks = max(1, -(-meta.total_episodes // max(1, episodes_per_block)))
    ds = ray.data.range(meta.total_episodes, override_num_blocks=blocks).rename_columns({"id": "episode"})
    ds = ds.map_batches(_read_episodes, fn_kwargs={"path": str(meta.path)}, batch_size=episodes_per_block)
    return ds.randomize_block_order() if shuffle else ds


class ShardReader:
    """Batches from one train worker's `ray.data.DataIterator` (its part of a ``streaming_split``).

    Args:
        iterator: The worker's DataIterator.
        batch_size: Rows per batch (one gradient step).
        shuffle_buffer: Rows kept for the local shuffle (Ray Data's ``local_shuffle_buffer_size``; 0: none).
        seed: Seed of the local shuffle.
    """

    def __init__(self, iterator: Any, batch_size: int, shuffle_buffer: int = 10_000, seed: Optional[int] = None):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"ShardReader batch_size must be an int >= 1, got {batch_size!r}")
        self.iterator = iterator
        self.batch_size = batch_size
        self.shuffle_buffer = int(shuffle_buffer)
        self.seed = seed
        self._it: Any = None
        self.rows_read = 0
        self.epochs = 0
        self._seen: List[set] = []  # the distinct transitions read in each epoch

    def __getstate__(self) -> Dict[str, Any]:
        state = dict(self.__dict__)
        state["_it"] = None  # a live generator does not travel; the receiving worker starts its own
        return state

    def _epoch(self) -> Any:
        self.epochs += 1
        self._seen.append(set())
        return iter(
            self.iterator.iter_batches(
                batch_size=self.batch_size,
                batch_format="numpy",
                drop_last=True,
                local_shuffle_buffer_size=self.shuffle_buffer or None,
                local_shuffle_seed=None if self.seed is None else self.seed + self.epochs,
            )
        )

    def _next(self) -> Dict[str, np.ndarray]:
        for _ in range(2):
            if self._it is None:
                self._it = self._epoch()
            try:
                return next(self._it)
            except StopIteration:
                self._it = None
        raise ValueError(
            f"this train worker's share of the dataset holds fewer than batch_size={self.batch_size} rows; "
            "lower train.batch_size or use fewer train workers"
        )

    def next_batches(self, num_batches: int = 1) -> TensorDict:
        """The next ``num_batches`` batches, concatenated (``num_batches x batch_size`` rows)."""
        parts: List[TensorDict] = []
        for _ in range(int(num_batches)):
            batch = self._next()
            if "episode" in batch and "step" in batch:
                keys = batch["episode"].astype(np.int64) << 32 | batch["step"].astype(np.int64)
                self._seen[-1].update(keys.tolist())
            parts.append(_batch_to_tensordict(batch))
        out = parts[0] if len(parts) == 1 else torch.cat(parts, 0)
        self.rows_read += int(out.batch_size[0])
        return out

    def report(self) -> Dict[str, Any]:
        """Rows read so far, the epochs begun, and the distinct transitions read in each epoch (a split may give a
        worker other blocks in each epoch; within one it reads only its share)."""
        return {"rows_read": self.rows_read, "epochs": self.epochs, "epoch_rows": [len(s) for s in self._seen]}
