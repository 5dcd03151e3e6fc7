"""`BatchedData`: ordered (id, data) pairs that may hold Ray ObjectRefs."""

from __future__ import annotations

import sys
from typing import Any, Dict, Iterator, List, Tuple


def is_object_ref(value: Any) -> bool:
    """Return True when ``value`` is a Ray ``ObjectRef``.

    Ray is never imported here: if it has not been imported by someone else,
    nothing can be an ObjectRef.
    """
    ray = sys.modules.get("ray")
    if ray is None:
        return False
    object_ref = getattr(ray, "ObjectRef", None)
    return object_ref is not None and isinstance(value, object_ref)


class BatchedData:
    """Container for batched data with associated identifiers.

    Holds either actual data or Ray ObjectRefs, keeping the order of the
    (id, data) pairs. Duplicate ids are allowed.

    Args:
        ids: One identifier per element.
        data: The elements (values or Ray ObjectRefs), same length as ``ids``.
    """

    __slots__ = ("_ids", "_data")

    def __init__(self, ids: List[Any], data: List[Any]) -> None:
        ids = list(ids)
        data = list(data)
        if len(ids) != len(data):
            raise ValueError(f"BatchedData needs one id per element: got {len(ids)} ids and {len(data)} elements")
        self._ids = ids
        self._data = data

    @property
    def is_future(self) -> bool:
        """True if any data element is a Ray ObjectRef."""
        return any(is_object_ref(d) for d in self._data)

    @staticmethod
    def from_dict(data_dict: Dict) -> BatchedData:
        """Create BatchedData from a dictionary mapping ids to data."""
        if not isinstance(data_dict, dict):
            raise TypeError(f"BatchedData.from_dict expects a dict of id -> data, got {type(data_dict).__name__}")
        return BatchedData(list(data_dict.keys()), list(data_dict.values()))

    def ids(self) -> Tuple:
        """Return all ids, in order."""
        return tuple(self._ids)

    def values(self) -> Tuple:
        """Return all data elements, in order."""
        return tuple(self._data)

    def items(self) -> Iterator[Tuple[Any, Any]]:
        """Iterate over (id, data) pairs, in order."""
        return iter(zip(self._ids, self._data))

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[Tuple[Any, Any]]:
        return self.items()

    def __getitem__(self, index: int) -> Tuple[Any, Any]:
        return self._ids[index], self._data[index]

    def __add__(self, other: BatchedData) -> BatchedData:
        if not isinstance(other, BatchedData):
            return NotImplemented
        return BatchedData(self._ids + other._ids, self._data + other._data)

    def __repr__(self) -> str:
        return f"BatchedData(n={len(self)}, ids={self._ids!r}, is_future={self.is_future})"
