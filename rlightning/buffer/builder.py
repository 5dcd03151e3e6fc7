"""`build_data_buffer`: build a registered buffer from a `BufferConfig` (re-exported by `rlightning.utils.builders`)."""

from __future__ import annotations

from typing import Callable, Optional, Type

from rlightning.buffer.data_buffer import DataBuffer
from rlightning.buffer.utils.preprocessors import Preprocessor
from rlightning.buffer.utils.utils import (
    default_env_ret_preprocess_fn,
    default_obs_preprocessor,
    default_policy_resp_preprocess_fn,
    default_postprocess_fn,
    default_preprocess_fn,
    default_reward_preprocessor,
)
from rlightning.utils.config import BufferConfig
from rlightning.utils.placement import Placement
from rlightning.utils.registry import BUFFERS

__all__ = ["build_data_buffer"]


def build_data_buffer(
    buffer_cls: str,
    buffer_cfg: BufferConfig,
    obs_preprocessor: Optional[Preprocessor] = default_obs_preprocessor,
    reward_preprocessor: Optional[Preprocessor] = default_reward_preprocessor,
    env_ret_preprocess_fn: Optional[Callable] = default_env_ret_preprocess_fn,
    policy_resp_preprocess_fn: Optional[Callable] = default_policy_resp_preprocess_fn,
    preprocess_fn: Optional[Callable] = default_preprocess_fn,
    postprocess_fn: Optional[Callable] = default_postprocess_fn,
    *,
    remote: Optional[bool] = None,
    placement: Optional[Placement] = None,
) -> DataBuffer:
    """Build a data buffer instance.

    Args:
        buffer_cls: Name of the buffer class registered in ``BUFFERS`` (``replay``, ``rollout``).
        buffer_cfg: Buffer configuration object.
        obs_preprocessor: Observation preprocessor function.
        reward_preprocessor: Reward preprocessor function.
        env_ret_preprocess_fn: Preprocessing function for environment returns.
        policy_resp_preprocess_fn: Preprocessing function for policy responses.
        preprocess_fn: General preprocessing function for each timestep.
        postprocess_fn: Post-processing function for completed episodes.
        remote: Storage shards as Ray actors (True) or in this process (False); None: as ``placement`` says.
        placement: The run's `Placement`; None with ``remote`` None: ``InternalFlag.REMOTE_STORAGE`` at ``init``.

    Returns:
        Configured DataBuffer instance (call ``init`` on it to create the storage shards).

    Raises:
        KeyError: an unknown buffer name (the registered ones are listed).
        TypeError: ``remote`` or ``placement`` of the wrong type.
    """
    import rlightning.buffer  # noqa: F401 - registers the built-in buffers

    cls: Type[DataBuffer] = BUFFERS.get(buffer_cls)
    return cls(
        config=buffer_cfg,
        obs_preprocessor=obs_preprocessor,
        reward_preprocessor=reward_preprocessor,
        env_ret_preprocess_fn=env_ret_preprocess_fn,
        policy_resp_preprocess_fn=policy_resp_preprocess_fn,
        preprocess_fn=preprocess_fn,
        postprocess_fn=postprocess_fn,
        remote=remote,
        placement=placement,
    )
