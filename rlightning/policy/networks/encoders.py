"""`build_encoder`: the observation encoder for a space (flat features or a CNN)."""

from __future__ import annotations

from typing import Any, Optional

from torch import nn

from rlightning.policy.algorithms.networks import ObsEncoder, space_name
from rlightning.policy.networks.cnn import CNN_TYPES, is_image_space

__all__ = ["build_encoder"]


def build_encoder(
    space: Any,
    *,
    cnn: str = "nature",
    normalize: bool = False,
    channels_last: Optional[bool] = None,
    policy_name: str = "policy",
) -> nn.Module:
    """The encoder for ``space``: an image CNN for image Boxes, else flat (optionally normalised) features.

    Every encoder has ``dim`` (its output width) and maps ``[B, *obs_shape]`` to ``[B, dim]`` float32.

    Args:
        space: The observation space.
        cnn: ``"nature"`` or ``"impala"``, for image spaces.
        normalize: Running mean/std normalisation of vector observations.
        channels_last: Channel order of image observations (None: from the shape).
        policy_name: Named in error messages.

    Raises:
        ValueError: an unknown ``cnn``, ``normalize`` with an image space, or a space no encoder takes.
    """
    if cnn not in CNN_TYPES:
        raise ValueError(f"unknown cnn {cnn!r}; valid: {', '.join(map(repr, CNN_TYPES))}")
    if is_image_space(space):
        if normalize:
            raise ValueError(
                f"policy {policy_name!r}: observation normalisation is for vector observations; "
                f"image observations {space_name(space)} are scaled to [0, 1] inside the CNN"
            )
        return CNN_TYPES[cnn](space.shape, channels_last=channels_last)
    return ObsEncoder(space, normalize=normalize, policy_name=policy_name)
