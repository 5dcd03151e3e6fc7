"""Sequence windows of stored episodes: fixed-length slices with an optional burn-in (off-policy recurrent).

    buffer:
      unit: episode
      slice_len: 40     # learn on 40 steps of an episode...
      burn_in: 20       # ...after re-running the 20 before them to warm up the recurrent state (R2D2)

A sampled batch is ``[B, burn_in + slice_len]``. Each window starts at the stored step whose recurrent
state (the record's state before that step) a learner unrolls from; ``burn_in`` marks the steps that
only warm the state up, ``mask`` the steps to learn from. A slice near an episode's start has a shorter
burn-in (its window starts at the episode's first step, with the zero state stored there); the steps of a
window past its slice, or past the episode's end, are in neither.
"""

from __future__ import annotations

from typing import Optional, Tuple

import torch

__all__ = ["episode_windows"]


def episode_windows(
    start: torch.Tensor,
    length: torch.Tensor,
    ring_rows: int,
    slice_len: Optional[int],
    burn_in: int = 0,
    generator: Optional[torch.Generator] = None,
) -> Tuple[torch.Tensor, torch.Tensor, Optional[torch.Tensor]]:
    """Ring rows ``[B, W]``, learn ``mask`` ``[B, W]`` and ``burn_in`` flags ``[B, W]`` of episode windows.

    Args:
        start: First ring row of each episode ``[B]``.
        length: Steps of each episode ``[B]``.
        ring_rows: Rows of the ring (row indices wrap around).
        slice_len: Steps to learn from per window (None: the whole episode, ``W`` the longest).
        burn_in: Steps before each slice to warm up a state (0: none; needs ``slice_len``).
        generator: Draws the slices' offsets (uniform over the episode's possible ones).

    Returns:
        rows (padding repeats the episode's last row), mask, and the burn-in flags (None when ``burn_in``
        is 0).

    Raises:
        ValueError: ``burn_in`` negative, or set without ``slice_len``.
    """
    burn_in = int(burn_in)
    if burn_in < 0:
        raise ValueError(f"burn_in must be an int >= 0, got {burn_in}")
    if burn_in and slice_len is None:
        raise ValueError("burn_in needs slice_len: a burn-in warms up the state before a fixed-length slice")
    if slice_len is None:
        width = int(length.max()) if length.numel() else 0
        offset = torch.zeros_like(length)
    else:
        width = int(slice_len)
        room = (length - width).clamp(min=0)
        offset = (torch.rand(length.shape, generator=generator, dtype=torch.float64) * (room + 1)).long()
        offset = torch.minimum(offset, room)
    first = (offset - burn_in).clamp(min=0)  # where each window starts: at most burn_in steps before its slice
    steps = torch.arange(width + burn_in).unsqueeze(0) + first.unsqueeze(1)
    inside = steps < length.unsqueeze(1)
    learn_end = (offset + width).unsqueeze(1)
    mask = inside & (steps >= offset.unsqueeze(1)) & (steps < learn_end)
    burn = (inside & (steps < offset.unsqueeze(1))) if burn_in else None
    steps = torch.minimum(steps, (length - 1).clamp(min=0).unsqueeze(1))
    rows = (start.unsqueeze(1) + steps) % ring_rows
    return rows, mask, burn
