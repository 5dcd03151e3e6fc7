"""The registered buffers: ``replay`` (off-policy) and ``rollout`` (on-policy)."""

from __future__ import annotations

from typing import Any, List, Optional

from tensordict import TensorDict

from rlightning.buffer.data_buffer import DataBuffer
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import BUFFERS

__all__ = ["ReplayBuffer", "RolloutBuffer"]

logger = get_logger(__name__)


@BUFFERS.register("replay")
class ReplayBuffer(DataBuffer):
    """Off-policy replay: data stays until overwritten; sampled with the configured sampler (uniform by default)."""


@BUFFERS.register("rollout")
class RolloutBuffer(DataBuffer):
    """On-policy rollouts: `sample` (the ``all`` sampler: every transition, shuffled) consumes the data.

    Once a sample is drawn the shards are cleared, so the next iteration
    trains only on fresh data.
    """

    clear_after_sample = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.config.sampler != "all":
            logger.warning(
                "RolloutBuffer with sampler=%r: the buffer is cleared after every sample, so data not drawn "
                "is lost; on-policy training usually wants sampler='all'",
                self.config.sampler,
            )

    def sample(self, batch_size: Optional[int] = None, num_batches: int = 1) -> List[TensorDict]:
        """Draw one batch per train worker, then clear the shards."""
        return super().sample(batch_size, num_batches)
