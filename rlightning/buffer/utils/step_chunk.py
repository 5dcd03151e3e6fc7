"""`step_chunk`: one seed-edge step (`Storage.add_transition`, `add_data_async`) as a one-column `Chunk`.

The per-step adds of the seed API go through the same writer as whole records: each step becomes a ``[N, 1]``
chunk of the stored keys (the step's observation, action and extras, the next step's observation, reward,
flags and value) and its env's `OpenEpisodes` stores the episodes it closes. What is stored is what the
converter (`rlightning.types.record.record_leaves`) gives for that step as part of a record.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

import numpy as np
import torch

from rlightning.buffer.utils.open_episodes import Chunk
from rlightning.types.record import NEXT, OBS, REWARD, TERMINATED, TRUNCATED, VALUE, key_tuple
from rlightning.types.stored_names import stored_name

__all__ = ["step_chunk"]

_FLAGS = (REWARD, TERMINATED, TRUNCATED)


def _column(value: Any, n: int, dtype: Any = None) -> torch.Tensor:
    arr = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
    return torch.from_numpy(np.ascontiguousarray(arr.reshape((n,) + arr.shape[1:])))


def step_chunk(
    n: int,
    step: Mapping[Any, np.ndarray],
    next_step: Mapping[Any, np.ndarray],
    raw_reward: np.ndarray,
    drop: Optional[np.ndarray],
    close_on_done: bool,
) -> Tuple[Chunk, Optional[torch.Tensor], torch.Tensor, torch.Tensor, torch.Tensor]:
    """The chunk of one step, with its bad rows, raw rewards, raw done flags and valid mask (each ``[N, 1]``).

    Args:
        n: Sub-envs of the env worker.
        step: The checked step dict the action was chosen on (observation, action, extras, its flags).
        next_step: The next checked step dict (next observation, reward and flags of the action, value).
        raw_reward: ``[N]`` (or ``[1]``) rewards as the env gave them (for episode stats).
        drop: ``[N]`` rows whose episode the NaN guard drops, or None.
        close_on_done: Done flags close episodes (``auto_truncate_episode``).
    """
    data: Dict[str, torch.Tensor] = {}
    for k in step:
        if k in _FLAGS:
            continue
        name = stored_name(key_tuple(k))
        if name is not None:
            data[name] = _column(step[k], n)
    for k in next_step:
        if key_tuple(k)[0] == OBS:
            data[stored_name((NEXT,) + key_tuple(k))] = _column(next_step[k], n)
    term = np.asarray(next_step[TERMINATED], dtype=bool).reshape(n)
    trunc = np.asarray(next_step[TRUNCATED], dtype=bool).reshape(n)
    data["reward"] = _column(next_step[REWARD], n, np.float32)
    data["terminated"] = torch.from_numpy(term.copy())
    data["truncated"] = torch.from_numpy(trunc.copy())
    done = term | trunc
    data["done"] = torch.from_numpy(done.copy())
    valid = ~(np.asarray(step[TERMINATED], dtype=bool).reshape(n) | np.asarray(step[TRUNCATED], dtype=bool).reshape(n))
    valid_t = torch.from_numpy(valid).reshape(n, 1)
    raw_done = torch.from_numpy(done).reshape(n, 1)
    if close_on_done:
        kept, closing = valid_t.clone(), raw_done & valid_t
    else:
        kept, closing = torch.ones(n, 1, dtype=torch.bool), torch.zeros(n, 1, dtype=torch.bool)
    boot = None
    if VALUE in next_step:
        boot = _column(np.asarray(next_step[VALUE], dtype=np.float32).reshape(n, -1)[:, 0], n).reshape(n, 1)
    bad = None
    if drop is not None and drop.any():
        bad = torch.from_numpy(np.asarray(drop, dtype=bool).reshape(n, 1).copy())
    reward = torch.from_numpy(np.broadcast_to(np.asarray(raw_reward, np.float64).reshape(-1), (n,)).copy())
    return Chunk(data, n, 1, kept, closing, boot), bad, reward.reshape(n, 1), raw_done.clone(), valid_t.clone()
