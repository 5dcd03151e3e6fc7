"""Offline datasets: Minari datasets in and out, Ray Data for large ones.

    from rlightning import datasets
    view = datasets.load("runs/data/pendulum_medium")        # a BufferView of transitions, episode boundaries kept
    datasets.load("pendulum/medium-v0", into=buffer)          # or into an initialised DataBuffer (transition unit)
    datasets.write(run.buffer, "runs/data/replay", env="Pendulum-v1", ref_max_score=-150.0)
    datasets.info("runs/data/pendulum_medium").normalized_score(-300.0)
    run.collect_dataset("runs/data/pendulum_medium", episodes=50)      # plays the run's policy (collect.py)

A dataset is a Minari dataset (``minari`` reads it back: ``minari.load_dataset(id)`` for an id,
``minari.MinariDataset("<folder>/data")`` for a folder), written atomically. Rows are transitions
(``obs``, ``action``, ``reward``, ``next_obs``, ``terminated``, ``truncated``, ``done``) with an ``episode``
column: each episode's steps in consecutive rows, its last step ``done``.

Bad input gets a clear error: a missing or corrupt dataset, NaN rewards, an empty dataset, spaces that do
not match the env (`check_spaces`).
"""

from __future__ import annotations

import os
from typing import Any, Optional, Union

import numpy as np
from tensordict import TensorDict

from rlightning.datasets.episodes import Episode, episodes_to_transitions, split_episodes, transitions_of
from rlightning.datasets.minari_io import DatasetInfo, info, read_episodes, write_episodes

__all__ = [
    "DatasetInfo",
    "Episode",
    "check_spaces",
    "info",
    "load",
    "load_episodes",
    "write",
]


def load(id_or_path: Union[str, os.PathLike], into: Any = None, env: Any = None) -> Any:
    """Read a local Minari dataset.

    Args:
        id_or_path: A dataset folder, or a Minari id in Minari's local datasets root.
        into: None: return a `BufferView` of the transitions. An initialised `DataBuffer` (transition unit):
            its shards are filled with them (split evenly) and it is returned.
        env: Check the dataset's spaces against this env first (a gymnasium id, ``gym.Env``, `EnvMeta`,
            or a `MainConfig` / `EnvConfig`); None: no check.

    Raises:
        FileNotFoundError: no dataset there.
        ValueError: a corrupt or empty dataset, a NaN or infinite reward or observation, spaces that do not
            match ``env``'s, a buffer of the episode unit.
        TypeError: ``into`` is neither None nor a DataBuffer.
    """
    meta, episodes = read_episodes(id_or_path)
    if env is not None:
        check_spaces(meta, env)
    rows = episodes_to_transitions(episodes)
    if into is None:
        from rlightning.buffer.utils import BufferView

        return BufferView(rows)
    from rlightning.buffer import DataBuffer

    if not isinstance(into, DataBuffer):
        raise TypeError(f"load(into=...) takes a DataBuffer (or None for a BufferView), got {type(into).__name__}")
    if into.config.unit != "transition":
        raise ValueError(
            f"load(into=...) fills a buffer of unit 'transition' (rows); this one has unit {into.config.unit!r}"
        )
    into.extend(rows)
    into.get_size()
    return into


def load_episodes(id_or_path: Union[str, os.PathLike]) -> tuple:
    """``(DatasetInfo, [Episode, ...])``: a dataset's metadata and its episodes as numpy arrays."""
    return read_episodes(id_or_path)


def write(
    data: Any,
    path_or_id: Union[str, os.PathLike],
    *,
    env: Any = None,
    observation_space: Any = None,
    action_space: Any = None,
    ref_min_score: Optional[float] = None,
    ref_max_score: Optional[float] = None,
    ref_episodes: int = 10,
    algorithm_name: Optional[str] = None,
    description: Optional[str] = None,
    overwrite: bool = False,
) -> DatasetInfo:
    """Write a `DataBuffer`, a `BufferView` or a TensorDict of transitions as a Minari dataset (atomically).

    The rows' episodes are found again (`split_episodes`): the replay buffer of a finished run is the
    classic "replay" dataset.

    Args:
        data: The transitions (a replay buffer's rows: ``obs``, ``action``, ``reward``, ``next_obs``,
            ``terminated``, and ``truncated`` / ``done`` when there), or a list of `Episode`.
        path_or_id: A folder, or a Minari id (written under Minari's datasets root).
        env: The env the data comes from (a gymnasium id, ``gym.Env``, `MainConfig` or `EnvConfig`): its
            spaces and spec are recorded, and a random policy's mean return over ``ref_episodes`` episodes
            becomes ``ref_min_score`` unless given.
        observation_space, action_space: The spaces, when no ``env`` is given.
        ref_min_score, ref_max_score: Reference returns for normalised scores (random, expert).
        ref_episodes: Episodes of the random policy for ``ref_min_score`` (0: not measured).
        algorithm_name, description: Recorded in the metadata.
        overwrite: Replace a dataset already at ``path_or_id``.

    Raises:
        ValueError: no transitions, NaN or infinite rewards or observations, data or spaces that do not fit.
        FileExistsError: a dataset is there already and ``overwrite`` is False.
    """
    from rlightning.datasets.collect import env_spaces, random_return

    spec = None
    if env is not None:
        observation_space, action_space, spec = env_spaces(env)
    if observation_space is None or action_space is None:
        raise ValueError(
            "write(...) needs the data's spaces: env=<gymnasium id or MainConfig>, or observation_space= and "
            "action_space="
        )
    if isinstance(data, (list, tuple)) and all(isinstance(e, Episode) for e in data):
        episodes = list(data)
    else:
        episodes = split_episodes(transitions_of(_as_tensordict(data), f"write({str(path_or_id)!r})"))
    if ref_min_score is None and env is not None and ref_episodes > 0:
        ref_min_score = random_return(env, ref_episodes)
    return write_episodes(
        episodes,
        path_or_id,
        observation_space=observation_space,
        action_space=action_space,
        env_spec=spec,
        ref_min_score=ref_min_score,
        ref_max_score=ref_max_score,
        algorithm_name=algorithm_name,
        description=description,
        overwrite=overwrite,
    )


def _as_tensordict(data: Any) -> TensorDict:
    from rlightning.buffer import DataBuffer
    from rlightning.buffer.utils import BufferView

    if isinstance(data, DataBuffer):
        return data.get_data()
    if isinstance(data, BufferView):
        return data.to_tensordict()
    if isinstance(data, TensorDict):
        return data
    raise TypeError(
        f"write(...) takes a DataBuffer, a BufferView, a TensorDict of transitions or a list of Episode, "
        f"got {type(data).__name__}"
    )


def check_spaces(meta: DatasetInfo, env: Any) -> None:
    """Raise ValueError when the dataset's observation or action space is not the env's (both named).

    Args:
        meta: The dataset's `DatasetInfo`.
        env: A gymnasium id, ``gym.Env``, `EnvMeta`, `MainConfig` or `EnvConfig`.
    """
    from rlightning.datasets.collect import env_spaces

    obs_space, act_space, _ = env_spaces(env)
    for name, ours, theirs in (
        ("observation", meta.observation_space, obs_space),
        ("action", meta.action_space, act_space),
    ):
        if not _same_space(ours, theirs):
            raise ValueError(
                f"dataset {meta.dataset_id!r} has {name} space {ours!r}, but the env has {theirs!r}; "
                f"train on the env the dataset was collected in ({meta.env_id or 'its env_spec'})"
            )


def _same_space(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if hasattr(a, "n"):
        return int(a.n) == int(b.n) and int(getattr(a, "start", 0)) == int(getattr(b, "start", 0))
    if hasattr(a, "low"):
        return (
            a.shape == b.shape
            and np.allclose(a.low, b.low, equal_nan=True)
            and np.allclose(a.high, b.high, equal_nan=True)
        )
    return a == b
