"""Image encoders: the Nature-DQN CNN and the IMPALA ResNet, fed raw env frames.

Both take observations as the env produces them, ``[B, H, W, C]`` (channels last,
as gymnasium's Atari and resize wrappers give) or ``[B, C, H, W]`` (channels
first, as frame stacking of grayscale frames gives), ``uint8`` or float. Integer
frames are scaled to [0, 1] inside the network, so the buffer and every process
boundary carry one byte per pixel.
"""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

import torch
from gymnasium import spaces
from torch import nn

__all__ = ["CNN_TYPES", "ImpalaCNN", "MinAtarCNN", "NatureCNN", "image_layout", "is_image_space"]

# The channel axis is the shorter end of a rank-3 shape, and at most this long.
_MAX_CHANNELS = 16


def image_layout(shape: Sequence[int], channels_last: Optional[bool] = None) -> Tuple[int, int, int, bool]:
    """``(channels, height, width, channels_last)`` of an image observation shape.

    A rank-2 shape is one channel. For rank 3 the channel axis is the shorter end,
    of at most 16 (``(84, 84, 4)`` is channels last, ``(4, 84, 84)`` channels
    first), unless ``channels_last`` says which.

    Raises:
        ValueError: not rank 2 or 3, a side below 1, or an order that cannot be told from the shape.
    """
    shape = tuple(int(s) for s in shape)
    if len(shape) not in (2, 3) or min(shape, default=0) < 1:
        raise ValueError(f"an image observation has shape (H, W), (H, W, C) or (C, H, W); got {shape}")
    if len(shape) == 2:
        return 1, shape[0], shape[1], False
    if channels_last is None:
        first, last = shape[0], shape[-1]
        if last < first and last <= _MAX_CHANNELS:
            channels_last = True
        elif first < last and first <= _MAX_CHANNELS:
            channels_last = False
        else:
            raise ValueError(
                f"cannot tell the channel axis of image shape {shape}: pass channels_last=True for (H, W, C) "
                "or channels_last=False for (C, H, W)"
            )
    if channels_last:
        return shape[2], shape[0], shape[1], True
    return shape[0], shape[1], shape[2], False


def is_image_space(space: Any) -> bool:
    """True for a Box of rank 3, or a ``uint8`` Box of rank 2, whose sides are at least 4 pixels."""
    if not isinstance(space, spaces.Box):
        return False
    shape = space.shape
    if len(shape) == 2 and space.dtype == "uint8":
        return min(shape) >= 4
    if len(shape) != 3:
        return False
    try:
        _, h, w, _ = image_layout(shape)
    except ValueError:
        return False
    return min(h, w) >= 4


def _conv(cin: int, cout: int, k: int, stride: int = 1, padding: int = 0) -> nn.Conv2d:
    layer = nn.Conv2d(cin, cout, k, stride=stride, padding=padding)
    nn.init.orthogonal_(layer.weight, math.sqrt(2))
    nn.init.zeros_(layer.bias)
    return layer


def _linear(cin: int, cout: int) -> nn.Linear:
    layer = nn.Linear(cin, cout)
    nn.init.orthogonal_(layer.weight, math.sqrt(2))
    nn.init.zeros_(layer.bias)
    return layer


class _ImageEncoder(nn.Module):
    """Shared input handling: batch flattening, channel order and uint8 scaling."""

    def __init__(self, obs_shape: Sequence[int], channels_last: Optional[bool], scale: Optional[bool]) -> None:
        super().__init__()
        self.obs_shape = tuple(int(s) for s in obs_shape)
        self.channels, self.height, self.width, self.channels_last = image_layout(self.obs_shape, channels_last)
        self.scale = scale  # None: scale uint8 inputs only
        self.normalize = False  # frames are scaled, not normalised with running statistics

    def _prepare(self, obs: torch.Tensor) -> Tuple[torch.Tensor, Tuple[int, ...]]:
        if not isinstance(obs, torch.Tensor):
            raise TypeError(f"{type(self).__name__} takes a torch.Tensor, got {type(obs).__name__}")
        rank = len(self.obs_shape)
        if tuple(obs.shape[obs.dim() - rank :]) != self.obs_shape or obs.dim() < rank + 1:
            raise ValueError(
                f"{type(self).__name__} expects observations [B, {', '.join(map(str, self.obs_shape))}], "
                f"got {tuple(obs.shape)}"
            )
        lead = tuple(obs.shape[: obs.dim() - rank])
        x = obs.reshape(-1, *self.obs_shape)
        pixels = x.dtype == torch.uint8  # bool planes (MinAtar) and floats are taken as they are
        x = x.float()
        if self.scale or (self.scale is None and pixels):
            x = x / 255.0
        if rank == 2:
            x = x.unsqueeze(1)
        elif self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return x, lead

    def _out_dim(self, trunk: nn.Module) -> int:
        with torch.no_grad():
            out = trunk(torch.zeros(1, self.channels, self.height, self.width))
        return int(out.reshape(1, -1).shape[1])


class NatureCNN(_ImageEncoder):
    """The DQN Nature paper's encoder (Mnih et al. 2015): three convolutions and a 512-unit layer.

    Args:
        obs_shape: One observation's shape, e.g. ``(84, 84, 4)`` or ``(4, 84, 84)``.
        features: Output width.
        channels_last: Channel order (None: from the shape).
        scale: Divide inputs by 255 (None: uint8 inputs only).

    Raises:
        ValueError: an image smaller than the convolutions need (at least 36 x 36).
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        features: int = 512,
        channels_last: Optional[bool] = None,
        scale: Optional[bool] = None,
    ) -> None:
        super().__init__(obs_shape, channels_last, scale)
        if min(self.height, self.width) < 36:
            raise ValueError(
                f"the Nature CNN needs images of at least 36 x 36 pixels, got {self.height} x {self.width}; "
                "use the IMPALA CNN (cnn='impala') or resize the frames"
            )
        self.trunk = nn.Sequential(
            _conv(self.channels, 32, 8, stride=4),
            nn.ReLU(),
            _conv(32, 64, 4, stride=2),
            nn.ReLU(),
            _conv(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.head = nn.Sequential(_linear(self._out_dim(self.trunk), features), nn.ReLU())
        self.dim = int(features)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x, lead = self._prepare(obs)
        return self.head(self.trunk(x)).reshape(*lead, self.dim)


class _Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv0 = _conv(channels, channels, 3, padding=1)
        self.conv1 = _conv(channels, channels, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv1(torch.relu(self.conv0(torch.relu(x))))


class ImpalaCNN(_ImageEncoder):
    """The IMPALA paper's ResNet encoder (Espeholt et al. 2018): three stages of conv, pool and two residual blocks.

    Works for small frames too (MinAtar's 10 x 10): each stage halves the sides, rounding up.

    Args:
        obs_shape: One observation's shape.
        channels: Width of each stage.
        features: Output width.
        channels_last: Channel order (None: from the shape).
        scale: Divide inputs by 255 (None: uint8 inputs only).
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        channels: Sequence[int] = (16, 32, 32),
        features: int = 256,
        channels_last: Optional[bool] = None,
        scale: Optional[bool] = None,
    ) -> None:
        super().__init__(obs_shape, channels_last, scale)
        stages, cin = [], self.channels
        for cout in channels:
            stages += [
                _conv(cin, int(cout), 3, padding=1),
                nn.MaxPool2d(3, stride=2, padding=1),
                _Residual(int(cout)),
                _Residual(int(cout)),
            ]
            cin = int(cout)
        self.trunk = nn.Sequential(*stages, nn.ReLU(), nn.Flatten())
        self.head = nn.Sequential(_linear(self._out_dim(self.trunk), features), nn.ReLU())
        self.dim = int(features)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x, lead = self._prepare(obs)
        return self.head(self.trunk(x)).reshape(*lead, self.dim)


class MinAtarCNN(_ImageEncoder):
    """The MinAtar paper's encoder (Young & Tian 2019): one 3x3 convolution of 16 channels, stride 1, ReLU.

    Its features (16 x H x W, 1600 for MinAtar's 10 x 10 frames) feed the policy's MLP heads; with
    ``hidden_sizes: [128]`` the whole network is the paper's (conv 16, fully connected 128).

    Args:
        obs_shape: One observation's shape, e.g. ``(10, 10, 4)``.
        channels: Convolution width.
        channels_last: Channel order (None: from the shape).
        scale: Divide inputs by 255 (None: uint8 inputs only; MinAtar's bool planes are taken as 0/1).
    """

    def __init__(
        self,
        obs_shape: Sequence[int],
        channels: int = 16,
        channels_last: Optional[bool] = None,
        scale: Optional[bool] = None,
    ) -> None:
        super().__init__(obs_shape, channels_last, scale)
        self.trunk = nn.Sequential(_conv(self.channels, int(channels), 3), nn.ReLU(), nn.Flatten())
        self.dim = self._out_dim(self.trunk)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x, lead = self._prepare(obs)
        return self.trunk(x).reshape(*lead, self.dim)


#: ``cnn`` names accepted by `build_encoder`.
CNN_TYPES = {"nature": NatureCNN, "impala": ImpalaCNN, "minatar": MinAtarCNN}
