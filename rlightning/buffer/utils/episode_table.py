"""`EpisodeTable`: which storage shard each env writes to, which train workers each shard feeds."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Optional, Sequence

import numpy as np

__all__ = ["EpisodeTable"]

_STORAGE_KEYS = ("storage", "storages", "buffer")
_ENV_KEYS = ("env", "envs")
_TRAIN_KEYS = ("train", "train_workers", "policy_train")


def _node_of(info: Any) -> Optional[str]:
    if isinstance(info, dict):
        for key in ("node_id", "node_ip", "node"):
            if info.get(key) is not None:
                return str(info[key])
        return None
    return None if info is None else str(info)


def _section(distribution: Dict[str, Dict[str, Any]], names: Sequence[str]) -> Dict[str, Optional[str]]:
    for name in names:
        if name in distribution:
            return {str(k): _node_of(v) for k, v in (distribution[name] or {}).items()}
    return {}


def even_blocks(num_storages: int, workers: Sequence[int], storages: Sequence[int]) -> Dict[int, List[int]]:
    """Contiguous even blocks of ``workers`` over ``storages`` (either side may be the larger).

    Raises:
        ValueError: the larger count is not a multiple of the smaller.
    """
    out: Dict[int, List[int]] = {s: [] for s in storages}
    w, s = len(workers), len(storages)
    if w == 0 or s == 0:
        return out
    if w % s == 0:
        per = w // s
        for i, st in enumerate(storages):
            out[st] = list(workers[i * per : (i + 1) * per])
    elif s % w == 0:
        per = s // w
        for i, st in enumerate(storages):
            out[st] = [workers[i // per]]
    else:
        raise ValueError(
            f"cannot split {w} train workers evenly over {s} storage shards: one count must be a multiple "
            f"of the other (e.g. {s} or {2 * s} train workers, or {w} storage shards)"
        )
    return out


class EpisodeTable:
    """Track the env -> storage shard mapping and the storage shard -> train worker mapping.

    Envs go to the least-loaded shard, ties broken round-robin (three envs on
    two shards: 0, 1, 0), assigned on first sight and stable afterwards. Train
    workers are assigned to shards in contiguous, even blocks (4 workers on 2
    shards: ``{0: [0, 1], 1: [2, 3]}``; 1 worker on 2 shards: both feed it).

    With node affinity, envs and train workers are bound to shards on their
    node according to ``component_distribution``: ``{"storage": {"0": {"node_id": ...}},
    "env": {env_id: {...}}, "train": {"0": {...}}}`` (``node_ip`` works too).

    Args:
        num_storages: Number of storage shards.
        env_ids: Envs to register now (more are assigned on first sight).
        num_train_workers: Number of train workers (None: no train mapping).
        component_distribution: Where storages, envs and train workers run.
        node_affinity_env: Bind envs to shards on their node.
        node_affinity_train: Bind train workers to shards on their node.

    Raises:
        ValueError: ``num_storages < 1``, or train workers that cannot be split evenly.
    """

    def __init__(
        self,
        num_storages: int,
        env_ids: Optional[Sequence[str]] = None,
        num_train_workers: Optional[int] = None,
        component_distribution: Optional[Dict[str, Dict[str, Dict[str, Any]]]] = None,
        node_affinity_env: bool = False,
        node_affinity_train: bool = False,
    ) -> None:
        if isinstance(num_storages, bool) or not isinstance(num_storages, (int, np.integer)) or num_storages < 1:
            raise ValueError(f"EpisodeTable num_storages must be an integer >= 1, got {num_storages!r}")
        if num_train_workers is not None and (
            isinstance(num_train_workers, bool)
            or not isinstance(num_train_workers, (int, np.integer))
            or num_train_workers < 0
        ):
            raise ValueError(
                f"EpisodeTable num_train_workers must be None or an integer >= 0, got {num_train_workers!r}"
            )
        self.num_storages = int(num_storages)
        self.num_train_workers = None if num_train_workers is None else int(num_train_workers)
        self.component_distribution = component_distribution or {}
        self.node_affinity_env = node_affinity_env
        self.node_affinity_train = node_affinity_train
        self._storage_node = _section(self.component_distribution, _STORAGE_KEYS)
        self._env_node = _section(self.component_distribution, _ENV_KEYS)
        self._train_node = _section(self.component_distribution, _TRAIN_KEYS)
        self._env_to_storage: Dict[str, int] = {}
        self._load = [0] * self.num_storages
        self._next = 0
        self._storage_to_train = self._assign_train_workers()
        if env_ids:
            self.register_envs(env_ids)

    # ------------------------------------------------------------------ envs

    def _check_storage(self, storage_idx: int) -> int:
        if isinstance(storage_idx, bool) or not isinstance(storage_idx, (int, np.integer)):
            raise TypeError(f"storage index must be an integer, got {storage_idx!r}")
        if not 0 <= storage_idx < self.num_storages:
            raise IndexError(f"storage index {storage_idx} is out of range [0, {self.num_storages})")
        return int(storage_idx)

    def _candidates(self, env_id: str) -> List[int]:
        if self.node_affinity_env:
            node = self._env_node.get(env_id)
            if node is not None:
                local = [s for s in range(self.num_storages) if self._storage_node.get(str(s)) == node]
                if local:
                    return local
        return list(range(self.num_storages))

    def _assign(self, env_id: str) -> int:
        candidates = self._candidates(env_id)
        least = min(self._load[s] for s in candidates)
        tied = [s for s in candidates if self._load[s] == least]
        chosen = next((s for s in tied if s >= self._next), tied[0])
        self._next = (chosen + 1) % self.num_storages
        self._env_to_storage[env_id] = chosen
        self._load[chosen] += 1
        return chosen

    def register_envs(self, env_ids: Iterable[str]) -> None:
        """Register a batch of env ids with the current assignment strategy (known ones keep their shard)."""
        if isinstance(env_ids, str):
            raise TypeError(f"register_envs expects an iterable of env ids, got the string {env_ids!r}")
        for env_id in env_ids:
            self.get_storage_idx_for_env(env_id)

    def get_storage_idx_for_env(self, env_id: str) -> int:
        """Return the storage index for ``env_id``, assigning it if unseen."""
        if not isinstance(env_id, str):
            raise TypeError(f"env ids must be strings, got {type(env_id).__name__} {env_id!r}")
        idx = self._env_to_storage.get(env_id)
        return self._assign(env_id) if idx is None else idx

    def forget_env(self, env_id: str) -> None:
        """Drop an env's assignment (an env whose first data was rejected); unknown ids are ignored."""
        idx = self._env_to_storage.pop(env_id, None)
        if idx is not None:
            self._load[idx] -= 1

    def has_env(self, env_id: str) -> bool:
        """True if ``env_id`` is already assigned."""
        return env_id in self._env_to_storage

    def get_env_to_storage(self) -> Dict[str, int]:
        """Return the env -> storage mapping."""
        return dict(self._env_to_storage)

    def get_envs_for_storage(self, storage_idx: int) -> List[str]:
        """List the env ids currently mapped to the given storage shard."""
        idx = self._check_storage(storage_idx)
        return [e for e, s in self._env_to_storage.items() if s == idx]

    # ------------------------------------------------------------------ train workers

    def _assign_train_workers(self) -> Dict[int, List[int]]:
        storages = list(range(self.num_storages))
        if not self.num_train_workers:
            return {s: [] for s in storages}
        workers = list(range(self.num_train_workers))
        if not (self.node_affinity_train and self._storage_node and self._train_node):
            return even_blocks(self.num_storages, workers, storages)
        out: Dict[int, List[int]] = {s: [] for s in storages}
        nodes = sorted({n for n in self._storage_node.values() if n is not None})
        left_s, left_w = list(storages), list(workers)
        for node in nodes:
            node_s = [s for s in left_s if self._storage_node.get(str(s)) == node]
            node_w = [w for w in left_w if self._train_node.get(str(w)) == node]
            if node_s and node_w:
                out.update(even_blocks(self.num_storages, node_w, node_s))
                left_s = [s for s in left_s if s not in node_s]
                left_w = [w for w in left_w if w not in node_w]
        if left_s or left_w:
            if not left_s:
                raise ValueError(f"train workers {left_w} have no storage shard on their node and none is left")
            out.update(even_blocks(self.num_storages, left_w or workers, left_s))
        return out

    def get_storage_to_train_workers(self) -> Dict[int, List[int]]:
        """Return the storage -> train workers mapping."""
        return {s: list(w) for s, w in self._storage_to_train.items()}

    def get_train_workers(self, storage_idx: int) -> List[int]:
        """Return the train workers assigned to the given storage shard."""
        return list(self._storage_to_train[self._check_storage(storage_idx)])

    def get_storages_for_train_worker(self, worker_idx: int) -> List[int]:
        """Return the storage shards that feed the given train worker."""
        if self.num_train_workers is None or not 0 <= worker_idx < self.num_train_workers:
            raise IndexError(f"train worker index {worker_idx} is out of range [0, {self.num_train_workers or 0})")
        return [s for s, ws in self._storage_to_train.items() if worker_idx in ws]

    def snapshot(self) -> Dict[str, Any]:
        """A plain snapshot for views: both mappings and the shard loads."""
        return {
            "num_storages": self.num_storages,
            "num_train_workers": self.num_train_workers,
            "env_to_storage": self.get_env_to_storage(),
            "storage_to_train_workers": self.get_storage_to_train_workers(),
            "storage_load": list(self._load),
        }

    def __repr__(self) -> str:
        return (
            f"EpisodeTable(num_storages={self.num_storages}, envs={len(self._env_to_storage)}, "
            f"train={self.get_storage_to_train_workers()})"
        )
