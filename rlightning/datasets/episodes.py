"""Transitions <-> episodes: the buffer's rows and a Minari dataset's episodes, both ways.

A buffer stores transitions (``obs``, ``action``, ``reward``, ``next_obs``, ``terminated``, ``truncated``,
``done``), each episode's steps in consecutive rows. `split_episodes` finds the episodes again: an episode
ends at a row whose ``done`` is set, or where the next row does not continue it (its ``obs`` is not this
row's ``next_obs``: a circular buffer's wrap, a segment stored open). A Minari episode holds ``T + 1``
observations and ``T`` actions, rewards and flags; `episodes_to_transitions` turns a list of them back into
rows, with an ``episode`` column (the episode's index) that keeps the boundaries.

Pure numpy and torch; never imports Ray or Minari.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence

import numpy as np
import torch
from tensordict import TensorDict

__all__ = ["Episode", "TRANSITION_KEYS", "episodes_to_transitions", "split_episodes", "transitions_of"]

#: The keys of a transition row (what `split_episodes` reads and `episodes_to_transitions` writes).
TRANSITION_KEYS = ("obs", "action", "reward", "next_obs", "terminated", "truncated", "done")


@dataclass
class Episode:
    """One episode as Minari stores it: ``observations`` ``[T + 1, ...]``, the rest ``[T, ...]``."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray

    def __len__(self) -> int:
        return int(self.rewards.shape[0])

    @property
    def episode_return(self) -> float:
        """The undiscounted return."""
        return float(np.sum(self.rewards, dtype=np.float64))


def transitions_of(data: TensorDict, what: str) -> Dict[str, np.ndarray]:
    """The transition keys of ``data`` (a TensorDict ``[n]``) as numpy arrays, checked.

    Raises:
        KeyError: a key missing (listed with those present).
        ValueError: no rows.
    """
    missing = [k for k in ("obs", "action", "reward", "next_obs", "terminated") if k not in data.keys()]
    if missing:
        raise KeyError(
            f"{what}: missing transition keys {missing}; a replay buffer's rows hold {list(TRANSITION_KEYS)}, "
            f"got {sorted(data.keys())}"
        )
    n = int(data.batch_size[0]) if data.batch_dims else 0
    if n == 0:
        raise ValueError(f"{what} is empty: no transitions to write")
    out = {k: data.get(k).detach().cpu().numpy() for k in ("obs", "action", "reward", "next_obs", "terminated")}
    out["reward"] = out["reward"].reshape(n)
    out["terminated"] = out["terminated"].reshape(n).astype(bool)
    trunc = data.get("truncated") if "truncated" in data.keys() else None
    out["truncated"] = np.zeros(n, bool) if trunc is None else trunc.detach().cpu().numpy().reshape(n).astype(bool)
    done = data.get("done") if "done" in data.keys() else None
    done_np = out["terminated"] | out["truncated"]
    if done is not None:
        done_np = done_np | done.detach().cpu().numpy().reshape(n).astype(bool)
    out["done"] = done_np
    return out


def split_episodes(rows: Dict[str, np.ndarray]) -> List[Episode]:
    """The episodes of transition rows (from `transitions_of`), in row order.

    An episode ends at a ``done`` row, where the next row's ``obs`` is not this row's ``next_obs``, or at the
    last row. An episode that ends without ``terminated`` or ``truncated`` set (cut by the buffer) is marked
    truncated at its last step, so every episode of the dataset ends flagged.
    """
    obs, next_obs = rows["obs"], rows["next_obs"]
    n = obs.shape[0]
    flat_obs, flat_next = obs.reshape(n, -1), next_obs.reshape(n, -1)
    continues = np.zeros(n, bool)
    if n > 1:
        same = np.all(flat_next[:-1] == flat_obs[1:], axis=1)
        continues[:-1] = same & ~rows["done"][:-1]
    ends = np.flatnonzero(~continues)
    episodes, start = [], 0
    for end in ends:
        sl = slice(start, end + 1)
        term = rows["terminated"][sl].copy()
        trunc = rows["truncated"][sl].copy()
        if not (term[-1] or trunc[-1]):
            trunc[-1] = True
        episodes.append(
            Episode(
                observations=np.concatenate([obs[sl], next_obs[end : end + 1]], axis=0),
                actions=rows["action"][sl],
                rewards=rows["reward"][sl].astype(np.float64),
                terminations=term,
                truncations=trunc,
            )
        )
        start = end + 1
    return episodes


def episodes_to_transitions(episodes: Sequence[Episode]) -> TensorDict:
    """Transition rows (`TRANSITION_KEYS` and ``episode``) of ``episodes``, concatenated in their order.

    Observations and rewards become float32 (Box observations) or int64 (Discrete ones), actions float32
    (Box) or int64 (Discrete); each episode's last step is ``done``.
    """
    if not episodes:
        raise ValueError("no episodes to turn into transitions")
    obs = np.concatenate([e.observations[:-1] for e in episodes], axis=0)
    next_obs = np.concatenate([e.observations[1:] for e in episodes], axis=0)
    actions = np.concatenate([e.actions for e in episodes], axis=0)
    rewards = np.concatenate([e.rewards for e in episodes]).astype(np.float32)
    term = np.concatenate([e.terminations for e in episodes]).astype(bool)
    trunc = np.concatenate([e.truncations for e in episodes]).astype(bool)
    last = np.zeros(len(rewards), bool)
    last[np.cumsum([len(e) for e in episodes]) - 1] = True
    trunc = trunc | (last & ~term)  # an episode that ends unflagged ends truncated: its boundary stays
    index = np.repeat(np.arange(len(episodes), dtype=np.int64), [len(e) for e in episodes])
    n = len(rewards)
    return TensorDict(
        {
            "obs": _tensor(obs),
            "action": _tensor(actions),
            "reward": torch.from_numpy(rewards),
            "next_obs": _tensor(next_obs),
            "terminated": torch.from_numpy(term),
            "truncated": torch.from_numpy(trunc),
            "done": torch.from_numpy(term | trunc),
            "episode": torch.from_numpy(index),
        },
        batch_size=[n],
    )


def _tensor(array: np.ndarray) -> torch.Tensor:
    array = np.ascontiguousarray(array)
    if array.dtype.kind == "f":
        return torch.from_numpy(array.astype(np.float32, copy=False))
    if array.dtype.kind in "iu":
        return torch.from_numpy(array.astype(np.int64, copy=False))
    if array.dtype.kind == "b":
        return torch.from_numpy(array)
    raise ValueError(f"dataset arrays of dtype {array.dtype} are not supported (numbers or booleans only)")
