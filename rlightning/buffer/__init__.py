"""The data buffer: `DataBuffer` and the registered `ReplayBuffer` / `RolloutBuffer`, and the samplers.

Storage internals (`Storage`, `EpisodeTable`, `BufferView`, preprocessors and
the default pipeline functions) live in `rlightning.buffer.utils`.
"""

from rlightning.buffer.buffers import ReplayBuffer, RolloutBuffer
from rlightning.buffer.data_buffer import DataBuffer
from rlightning.buffer.utils.samplers import (
    SAMPLERS,
    AllSampler,
    BatchSampler,
    PrioritizedSampler,
    Sampler,
    UniformSampler,
    make_sampler,
)

__all__ = [
    "SAMPLERS",
    "AllSampler",
    "BatchSampler",
    "DataBuffer",
    "PrioritizedSampler",
    "ReplayBuffer",
    "RolloutBuffer",
    "Sampler",
    "UniformSampler",
    "make_sampler",
]
