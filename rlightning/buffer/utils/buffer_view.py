"""`BufferView`: a read-only, buffer-like view of a TensorDict for dataset creation."""

from __future__ import annotations

from typing import Any, Iterator, List, Optional, Sequence

import torch
from tensordict import TensorDict
from torch.utils.data import DataLoader, Dataset

__all__ = ["BufferView", "BufferViewDataset"]


def _read_only(*_: Any, **__: Any) -> None:
    raise TypeError("BufferView is read-only; copy it with to_tensordict() to modify the data")


def _identity_collate(batch: Any) -> Any:
    return batch


class BufferViewDataset(Dataset):
    """A torch `Dataset` over a `BufferView`; batched fetches are one gather (``__getitems__``)."""

    def __init__(self, view: BufferView) -> None:
        self.view = view

    def __len__(self) -> int:
        return len(self.view)

    def __getitem__(self, index: int) -> TensorDict:
        return self.view[index]

    def __getitems__(self, indices: Sequence[int]) -> TensorDict:
        return self.view[torch.as_tensor(list(indices), dtype=torch.int64)]


class BufferView:
    """A read-only, buffer-like view of a TensorDict for dataset creation.

    ``len``, indexing and slicing return TensorDicts (indexing an int gives one
    row); `iter_batches` walks it in mini-batches; `as_dataset` and
    `dataloader` hand it to torch. Setting items, keys or writing through the
    view raises ``TypeError``; what it returns are locked copies, so writing
    into a returned tensor never changes the source.

    Args:
        data: A TensorDict with at least one batch dimension.
    """

    __setitem__ = _read_only
    __delitem__ = _read_only
    set = _read_only
    update = _read_only
    extend = _read_only
    add = _read_only
    append = _read_only
    clear = _read_only

    def __init__(self, data: TensorDict) -> None:
        if not isinstance(data, TensorDict):
            raise TypeError(f"BufferView wraps a TensorDict, got {type(data).__name__}")
        if not data.batch_dims:
            raise ValueError("BufferView needs a TensorDict with a batch dimension, got batch_size=[]")
        object.__setattr__(self, "_data", data.copy().lock_())

    def __setattr__(self, name: str, value: Any) -> None:
        _read_only()

    @property
    def batch_size(self) -> torch.Size:
        """The TensorDict's batch size."""
        return self._data.batch_size

    def keys(self) -> List[str]:
        """Keys of the data."""
        return list(self._data.keys())

    def __len__(self) -> int:
        return int(self._data.batch_size[0])

    def __contains__(self, key: str) -> bool:
        return key in self._data.keys()

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, str):
            value = self._data.get(index)
            return value.clone()
        if isinstance(index, int) and not -len(self) <= index < len(self):
            raise IndexError(f"BufferView index {index} is out of range for length {len(self)}")
        out = self._data[index]
        if isinstance(index, torch.Tensor) and index.dtype != torch.bool and index.ndim:
            copied = out  # an index tensor gathers: already a copy
        else:
            copied = out.clone()  # ints and slices are views: a copy keeps the source unchanged
        return copied.lock_() if isinstance(copied, TensorDict) else copied

    def __iter__(self) -> Iterator[TensorDict]:
        """Iterate over rows (see `iter_batches` for mini-batches)."""
        for i in range(len(self)):
            yield self[i]

    def iter_batches(
        self,
        batch_size: int,
        shuffle: bool = False,
        drop_last: bool = False,
        generator: Optional[torch.Generator] = None,
    ) -> Iterator[TensorDict]:
        """Yield mini-batches of ``batch_size`` rows (the last may be smaller unless ``drop_last``).

        Raises:
            ValueError: batch_size is not a positive integer.
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"iter_batches batch_size must be a positive integer, got {batch_size!r}")
        n = len(self)
        order = torch.randperm(n, generator=generator) if shuffle else None
        stop = n - n % batch_size if drop_last else n
        for start in range(0, stop, batch_size):
            end = min(start + batch_size, n)
            yield self[order[start:end]] if order is not None else self[start:end]

    def as_dataset(self) -> BufferViewDataset:
        """A torch `Dataset` of rows."""
        return BufferViewDataset(self)

    def dataloader(self, batch_size: int, shuffle: bool = False, **kwargs: Any) -> DataLoader:
        """A torch `DataLoader` yielding TensorDict mini-batches (one gather per batch)."""
        return DataLoader(
            self.as_dataset(), batch_size=batch_size, shuffle=shuffle, collate_fn=_identity_collate, **kwargs
        )

    def to_ray_dataset(self, num_blocks: Optional[int] = None) -> Any:
        """The rows as a ``ray.data.Dataset`` (one column per key; nested keys joined with dots), for Ray Data
        pipelines and the ``offline`` engine's streaming (`rlightning.datasets.ray_data`)."""
        from rlightning.datasets.ray_data import view_to_ray_dataset  # Ray only when asked for

        return view_to_ray_dataset(self, num_blocks)

    @classmethod
    def from_ray_dataset(cls, dataset: Any) -> BufferView:
        """A `BufferView` of every row of a ``ray.data.Dataset`` (read into this process).

        Raises:
            TypeError: not a Ray Dataset.
            ValueError: a dataset without rows.
        """
        from rlightning.datasets.ray_data import ray_dataset_to_view

        return ray_dataset_to_view(dataset)

    def to_tensordict(self) -> TensorDict:
        """A writable copy of the data."""
        return self._data.clone().unlock_()

    def __repr__(self) -> str:
        return f"BufferView(len={len(self)}, keys={sorted(self.keys())})"
