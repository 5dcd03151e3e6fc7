"""Minari datasets in and out: `write` transitions or episodes as one, `read_episodes` / `info` read one back.

A dataset is a folder in Minari's local layout: ``<folder>/data/metadata.json`` beside the episode files
(Minari's ``arrow`` format). ``path_or_id`` names it either way Minari does:

- a Minari id (``pendulum/medium-v0``: ``(namespace/)name-v<version>``) lives under Minari's datasets root
  (``MINARI_DATASETS_PATH``, default ``~/.minari/datasets``), where ``minari.load_dataset`` finds it;
- anything else (``runs/data/pendulum_medium``, an existing folder, a ``pathlib.Path``) is a folder.

A write is atomic: the dataset is written into a hidden folder beside its target and renamed into place,
so a dataset is complete or absent. The metadata holds what normalised scores need, as Minari's own
datasets do: ``ref_min_score`` (a random policy's mean return) and ``ref_max_score`` (an expert's).

This module imports Minari when called (the ``minari`` extra).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np
from gymnasium import spaces

from rlightning.datasets.episodes import Episode
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["DatasetInfo", "dataset_folder", "info", "read_episodes", "require_minari", "write_episodes"]

PathOrId = Union[str, os.PathLike]

#: Minari's dataset id form: ``(namespace/)name-v<version>``.
_ID_RE = re.compile(r"^(?:[\w\-]+/)*[\w\-.]+-v\d+$")

#: Spaces a dataset's observations and actions may have.
_SUPPORTED = (spaces.Box, spaces.Discrete)


def require_minari() -> Any:
    """The ``minari`` module, or an ImportError that says how to install it."""
    try:
        import minari
    except ImportError:
        raise ImportError(
            "rlightning.datasets reads and writes Minari datasets: pip install 'rlightning[minari]'"
        ) from None
    return minari


def _is_id(path_or_id: PathOrId) -> bool:
    if isinstance(path_or_id, os.PathLike):
        return False
    text = str(path_or_id)
    if text.startswith((".", "/", "~")) or os.path.exists(text):
        return False
    return bool(_ID_RE.match(text))


def dataset_folder(path_or_id: PathOrId) -> Path:
    """The folder of a dataset (its ``data/`` subfolder holds the metadata): a path, or a Minari id's folder.

    Raises:
        TypeError: neither a string nor a path.
    """
    if not isinstance(path_or_id, (str, os.PathLike)):
        raise TypeError(f"a dataset is named by a folder path or a Minari id (a string), got {path_or_id!r}")
    if _is_id(path_or_id):
        from minari.storage.datasets_root_dir import get_dataset_path

        require_minari()
        return Path(get_dataset_path(str(path_or_id))).absolute()
    folder = Path(path_or_id).expanduser().absolute()  # minari's arrow reader joins relative paths twice
    if folder.name == "data" and (folder / "metadata.json").is_file():
        return folder.parent  # the data folder itself was given
    return folder


@dataclass
class DatasetInfo:
    """What a dataset's metadata says: where it is, its spaces, size, env and reference returns."""

    path: Path
    dataset_id: str
    observation_space: Any
    action_space: Any
    total_episodes: int
    total_steps: int
    env_id: Optional[str] = None
    ref_min_score: Optional[float] = None
    ref_max_score: Optional[float] = None
    metadata: Dict[str, Any] = field(default_factory=dict)

    @property
    def return_mean(self) -> Optional[float]:
        """The mean return of the dataset's episodes (recorded when rlightning wrote it)."""
        value = self.metadata.get("rlightning_return_mean")
        return None if value is None else float(value)

    def normalized_score(self, returns: Any) -> Any:
        """``100 * (return - ref_min_score) / (ref_max_score - ref_min_score)`` (D4RL's normalised score).

        Raises:
            ValueError: the dataset records no reference returns.
        """
        if self.ref_min_score is None or self.ref_max_score is None:
            raise ValueError(
                f"dataset {self.dataset_id!r} records no reference returns (ref_min_score, ref_max_score): "
                "write it with ref_max_score=... (an expert's mean return) to get normalised scores"
            )
        span = self.ref_max_score - self.ref_min_score
        if span == 0:
            raise ValueError(f"dataset {self.dataset_id!r}: ref_max_score equals ref_min_score ({self.ref_min_score})")
        return 100.0 * (np.asarray(returns, dtype=np.float64) - self.ref_min_score) / span


def info(path_or_id: PathOrId) -> DatasetInfo:
    """Read a dataset's metadata (no episodes).

    Raises:
        FileNotFoundError: no dataset there (the folder or its ``data/metadata.json`` missing).
        ValueError: a corrupt dataset (metadata that is not JSON, or lacks what Minari writes).
    """
    require_minari()
    folder = dataset_folder(path_or_id)
    meta_file = folder / "data" / "metadata.json"
    if not folder.is_dir():
        raise FileNotFoundError(
            f"no dataset at {str(folder)!r}: the folder does not exist; write one with "
            "rlightning.datasets.write(...) or run.collect_dataset(...)"
        )
    if not meta_file.is_file():
        raise FileNotFoundError(
            f"no dataset at {str(folder)!r}: it has no data/metadata.json (a Minari dataset folder holds "
            "data/metadata.json and the episode files)"
        )
    try:
        from minari.dataset.minari_storage import MinariStorage

        storage = MinariStorage.read(folder / "data")
        meta = json.loads(meta_file.read_text())
    except Exception as err:  # noqa: BLE001 - whatever the reader raises, the dataset is unreadable
        raise ValueError(f"dataset at {str(folder)!r} is corrupt: its metadata cannot be read ({err})") from None
    env_id = None
    spec = meta.get("env_spec")
    if isinstance(spec, str):
        try:
            env_id = json.loads(spec).get("id")
        except json.JSONDecodeError:
            env_id = None
    return DatasetInfo(
        path=folder,
        dataset_id=str(meta.get("dataset_id", folder.name)),
        observation_space=storage.observation_space,
        action_space=storage.action_space,
        total_episodes=int(meta.get("total_episodes", 0)),
        total_steps=int(meta.get("total_steps", 0)),
        env_id=env_id,
        ref_min_score=_float_or_none(meta.get("ref_min_score")),
        ref_max_score=_float_or_none(meta.get("ref_max_score")),
        metadata=meta,
    )


def _float_or_none(value: Any) -> Optional[float]:
    return None if value is None else float(value)


def read_episodes(path_or_id: PathOrId, check_finite: bool = True) -> tuple:
    """``(DatasetInfo, [Episode, ...])`` of a dataset, read with Minari.

    Raises:
        FileNotFoundError: no dataset there.
        ValueError: a corrupt dataset (episode files missing or unreadable, lengths that disagree), an empty
            one, spaces rlightning cannot learn from, or (``check_finite``) a NaN or infinite reward or
            observation (the episode and step named).
    """
    meta = info(path_or_id)
    for name, space in (("observation", meta.observation_space), ("action", meta.action_space)):
        if not isinstance(space, _SUPPORTED):
            raise ValueError(
                f"dataset {meta.dataset_id!r}: {name} space {space!r} is not supported; datasets hold Box or "
                "Discrete observations and actions"
            )
    if meta.total_episodes == 0 or meta.total_steps == 0:
        raise ValueError(f"dataset {meta.dataset_id!r} at {str(meta.path)!r} is empty: it holds no episodes")
    episodes = read_episode_range(meta.path, range(meta.total_episodes), check_finite, meta.dataset_id)
    if sum(len(e) for e in episodes) == 0:
        raise ValueError(f"dataset {meta.dataset_id!r} at {str(meta.path)!r} is empty: its episodes have no steps")
    return meta, episodes


def read_episode_range(
    path: Union[str, os.PathLike], indices: Sequence[int], check_finite: bool = True, name: Optional[str] = None
) -> List[Episode]:
    """The episodes ``indices`` of the dataset folder ``path`` (Ray Data's read tasks call this).

    Raises:
        ValueError: a corrupt episode (unreadable, lengths that disagree), a NaN or infinite value.
    """
    from minari.dataset.minari_storage import MinariStorage

    folder = dataset_folder(path)
    name = name or folder.name
    indices = list(indices)
    try:
        storage = MinariStorage.read(folder / "data")
        raw = list(storage.get_episodes(indices))
    except Exception as err:  # noqa: BLE001 - a missing or truncated episode file
        raise ValueError(
            f"dataset {name!r} at {str(folder)!r} is corrupt: its episodes cannot be read ({err})"
        ) from None
    episodes = []
    for i, ep in zip(indices, raw):
        episode = Episode(
            observations=np.asarray(ep["observations"]),
            actions=np.asarray(ep["actions"]),
            rewards=np.asarray(ep["rewards"], dtype=np.float64).reshape(-1),
            terminations=np.asarray(ep["terminations"]).reshape(-1).astype(bool),
            truncations=np.asarray(ep["truncations"]).reshape(-1).astype(bool),
        )
        t = len(episode)
        if episode.observations.shape[0] != t + 1 or episode.actions.shape[0] != t:
            raise ValueError(
                f"dataset {name!r} is corrupt: episode {i} has {episode.observations.shape[0]} "
                f"observations and {episode.actions.shape[0]} actions for {t} rewards (expected {t + 1} and {t})"
            )
        if check_finite:
            check_finite_episode(episode, i, name)
        episodes.append(episode)
    return episodes


def check_finite_episode(episode: Episode, index: int, name: str) -> None:
    """Raise ValueError naming the first NaN or infinite reward or observation of ``episode``."""
    for key, values in (("reward", episode.rewards), ("observation", episode.observations)):
        if values.dtype.kind != "f":
            continue
        bad = ~np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
        if bad.any():
            step = int(np.flatnonzero(bad)[0])
            raise ValueError(
                f"dataset {name!r}: episode {index} has a NaN or infinite {key} at step {step} "
                f"({values[step]!r}); clean the data (drop the episode) before learning from it"
            )


def check_space(values: np.ndarray, space: Any, what: str) -> None:
    """Raise ValueError when ``values`` ``[n, ...]`` do not fit ``space``'s shape (or a Discrete's range)."""
    if isinstance(space, spaces.Discrete):
        flat = values.reshape(-1)
        if values.ndim > 2 or (values.ndim == 2 and values.shape[1] != 1):
            raise ValueError(f"{what} have shape {values.shape[1:]}; the Discrete space {space!r} takes scalars")
        if flat.size and (flat.min() < space.start or flat.max() >= space.start + space.n):
            raise ValueError(f"{what} range {flat.min()}..{flat.max()}, outside the space {space!r}")
        return
    if isinstance(space, spaces.Box) and tuple(values.shape[1:]) != tuple(space.shape):
        raise ValueError(f"{what} have shape {tuple(values.shape[1:])}; the space {space!r} has {space.shape}")


def write_episodes(
    episodes: Sequence[Episode],
    path_or_id: PathOrId,
    *,
    observation_space: Any,
    action_space: Any,
    env_spec: Any = None,
    ref_min_score: Optional[float] = None,
    ref_max_score: Optional[float] = None,
    algorithm_name: Optional[str] = None,
    description: Optional[str] = None,
    overwrite: bool = False,
    extra_metadata: Optional[Dict[str, Any]] = None,
) -> DatasetInfo:
    """Write ``episodes`` as a Minari dataset at ``path_or_id``, atomically (complete or absent).

    Raises:
        ValueError: no episodes, a NaN or infinite reward or observation, data that does not fit the spaces,
            spaces other than Box or Discrete.
        FileExistsError: a dataset is there already and ``overwrite`` is False.
    """
    minari = require_minari()
    from minari.data_collector.episode_buffer import EpisodeBuffer
    from minari.dataset.minari_storage import MinariStorage

    episodes = [e for e in episodes if len(e) > 0]
    if not episodes:
        raise ValueError(f"nothing to write to {str(path_or_id)!r}: the data holds no episodes (no steps)")
    for name, space in (("observation", observation_space), ("action", action_space)):
        if not isinstance(space, _SUPPORTED):
            raise ValueError(
                f"{name} space {space!r} is not supported; datasets hold Box or Discrete observations and actions"
            )
    label = str(path_or_id)
    for i, ep in enumerate(episodes):
        check_finite_episode(ep, i, label)
        check_space(ep.observations, observation_space, f"episode {i}: observations")
        check_space(np.asarray(ep.actions), action_space, f"episode {i}: actions")
    folder = dataset_folder(path_or_id)
    if folder.exists() and not overwrite:
        raise FileExistsError(
            f"a dataset (or another file) is at {str(folder)!r} already; pass overwrite=True "
            "(`--overwrite` on the command line) to replace it"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    dataset_id = str(path_or_id) if _is_id(path_or_id) else _folder_id(folder)
    tmp = folder.parent / f".{folder.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    returns = [e.episode_return for e in episodes]
    try:
        (tmp / "data").mkdir(parents=True)
        storage = MinariStorage.new(
            tmp / "data",
            observation_space=observation_space,
            action_space=action_space,
            env_spec=env_spec,
            data_format="arrow",
            jpeg_encoding=False,
        )
        metadata: Dict[str, Any] = {
            "dataset_id": dataset_id,
            "minari_version": minari.__version__,
            "rlightning_return_mean": float(np.mean(returns)),
            "rlightning_return_std": float(np.std(returns)),
        }
        if algorithm_name:
            metadata["algorithm_name"] = algorithm_name
        if description:
            metadata["description"] = description
        if ref_min_score is not None:
            metadata["ref_min_score"] = float(ref_min_score)
        if ref_max_score is not None:
            metadata["ref_max_score"] = float(ref_max_score)
        metadata.update(extra_metadata or {})
        storage.update_metadata(metadata)
        storage.update_episodes(
            EpisodeBuffer(
                id=i,
                observations=_space_values(ep.observations, observation_space),
                actions=_space_values(np.asarray(ep.actions), action_space),
                rewards=ep.rewards.astype(np.float64),
                terminations=ep.terminations.astype(bool),
                truncations=ep.truncations.astype(bool),
            )
            for i, ep in enumerate(episodes)
        )
        _namespace_for(path_or_id)
        _replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    logger.info("wrote dataset %s: %d episodes, %d steps", folder, len(episodes), sum(len(e) for e in episodes))
    return info(folder)


def _space_values(values: np.ndarray, space: Any) -> np.ndarray:
    if isinstance(space, spaces.Discrete):
        return values.reshape(-1).astype(space.dtype)
    return values.astype(space.dtype, copy=False)


def _folder_id(folder: Path) -> str:
    name = re.sub(r"[^\w\-]", "_", folder.name) or "dataset"
    return name if re.search(r"-v\d+$", name) else f"{name}-v0"


def _namespace_for(path_or_id: PathOrId) -> None:
    """A Minari id with a namespace: create the namespace in Minari's root, as ``minari`` itself does."""
    if not _is_id(path_or_id) or "/" not in str(path_or_id):
        return
    from minari.namespace import create_namespace, list_local_namespaces

    namespace = str(path_or_id).rsplit("/", 1)[0]
    if namespace not in list_local_namespaces():
        create_namespace(namespace)


def _replace(tmp: Path, folder: Path) -> None:
    """Rename ``tmp`` to ``folder``; an old ``folder`` is renamed aside first and removed after."""
    old: Optional[Path] = None
    if folder.exists():
        old = folder.parent / f".{folder.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(folder, old)
    try:
        os.replace(tmp, folder)
    except BaseException:
        if old is not None:
            os.replace(old, folder)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def episode_returns(episodes: Sequence[Episode]) -> List[float]:
    """Each episode's undiscounted return."""
    return [e.episode_return for e in episodes]
