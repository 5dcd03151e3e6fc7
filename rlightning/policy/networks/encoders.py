"""`build_encoder`: the observation encoder for a space (flat features, a CNN, or one per key of a Dict/Tuple).

    encoder = build_encoder(space, cnn="impala", normalize=True)
    features = encoder(obs_to_tensor(obs, device))     # [B, encoder.dim] float32

Observations reach an encoder as the record carries them: a tensor ``[B, ...]`` for
a Box/Discrete/MultiDiscrete/MultiBinary space, and for a Dict or Tuple space a
mapping (a TensorDict in training, a dict of arrays from the env when acting) or,
for a Tuple, a sequence in the space's order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlightning.policy.algorithms.networks import ObsEncoder, space_name
from rlightning.policy.networks.cnn import CNN_TYPES, is_image_space
from rlightning.policy.networks.masks import ACTION_MASK

__all__ = ["DictEncoder", "batch_len", "build_encoder", "nest_dotted_keys", "obs_to_tensor"]


def obs_to_tensor(obs: Any, device: Any = None) -> Any:
    """``obs`` as tensors on ``device``: arrays become tensors, mappings and tuples keep their structure.

    A TensorDict is moved as it is; a dict gives a dict of tensors; a tuple or list (a Tuple space's
    observation) a tuple of tensors; anything else ``torch.as_tensor``.
    """
    if type(obs) is np.ndarray:  # the common case first (acting is per step): what the last line does
        return torch.as_tensor(obs, device=device)
    if isinstance(obs, torch.Tensor):
        return obs.to(device) if device is not None else obs
    if hasattr(obs, "batch_size") and hasattr(obs, "to"):  # a TensorDict: one move for every leaf
        return obs.to(device) if device is not None else obs
    if isinstance(obs, Mapping):
        return {k: obs_to_tensor(v, device) for k, v in obs.items()}
    if isinstance(obs, (tuple, list)) and obs and isinstance(obs[0], (np.ndarray, torch.Tensor, Mapping, tuple)):
        return tuple(obs_to_tensor(v, device) for v in obs)
    return torch.as_tensor(obs, device=device)


def nest_dotted_keys(data: Any) -> Any:
    """A TensorDict whose dotted keys (``"obs.image"``, as a storage's sample names dict entries) are nested.

    ``{"obs.image": x, "obs.pos": y, "action": a}`` becomes ``{"obs": {"image": x, "pos": y}, "action": a}``;
    the tensors are not copied. A TensorDict without dotted keys is returned as it is.
    """
    dotted = [k for k in data.keys() if isinstance(k, str) and "." in k]
    if not dotted:
        return data
    out = data.exclude(*dotted)
    for key in dotted:
        out.set(tuple(key.split(".")), data.get(key))
    return out


def batch_len(obs: Any) -> int:
    """Rows in a batch of observations (a tensor, array, TensorDict, dict or tuple of them)."""
    if hasattr(obs, "batch_size") and not isinstance(obs, (np.ndarray, torch.Tensor)):
        return int(obs.batch_size[0])
    if isinstance(obs, Mapping):
        return batch_len(next(iter(obs.values())))
    if isinstance(obs, (tuple, list)) and obs and not np.isscalar(obs[0]):
        return batch_len(obs[0])
    return int(np.shape(obs)[0])


def _module_key(key: str) -> str:
    # nn.ModuleDict keys cannot hold "." and must not clash with Module attributes
    return "k_" + key.replace(".", "_")


class DictEncoder(nn.Module):
    """One encoder per key of a Dict (or entry of a Tuple) space, their features concatenated in key order.

    The key ``action_mask`` is not encoded (`rlightning.policy.networks.masks`).

    Each key gets what `build_encoder` gives its subspace: a CNN for an image, flat (optionally
    normalised) features for a vector, a nested `DictEncoder` for a nested Dict or Tuple.

    Args:
        space: A ``gymnasium.spaces.Dict`` or ``Tuple``.
        cnn: CNN of image entries.
        normalize: Running mean/std normalisation of the vector entries (image entries are scaled).
        channels_last: Channel order of image entries (None: from each shape).
        policy_name: Named in error messages.

    Raises:
        ValueError: an empty space, or an entry no encoder takes (named by its key).
    """

    def __init__(
        self,
        space: Any,
        *,
        cnn: str = "nature",
        normalize: bool = False,
        channels_last: Optional[bool] = None,
        policy_name: str = "policy",
    ) -> None:
        super().__init__()
        self.is_tuple = isinstance(space, spaces.Tuple)
        items = [(str(i), s) for i, s in enumerate(space.spaces)] if self.is_tuple else list(space.spaces.items())
        items = [(k, s) for k, s in items if k != ACTION_MASK]  # the action mask is read by the policy, not encoded
        if not items:
            raise ValueError(f"policy {policy_name!r}: the observation space {space_name(space)} has no entries")
        self.keys: List[str] = [str(k) for k, _ in items]
        encoders: Dict[str, nn.Module] = {}
        for key, sub in items:
            try:
                norm = normalize and not is_image_space(sub)  # image entries are scaled, not normalised
                encoders[_module_key(str(key))] = build_encoder(
                    sub, cnn=cnn, normalize=norm, channels_last=channels_last, policy_name=policy_name
                )
            except ValueError as err:
                raise ValueError(f"observation entry {key!r} of {type(space).__name__} space: {err}") from None
        self.encoders = nn.ModuleDict(encoders)
        self.dim = int(sum(e.dim for e in self.encoders.values()))
        self.normalize = any(getattr(e, "normalize", False) for e in self.encoders.values())

    def _parts(self, obs: Any) -> List[Any]:
        if self.is_tuple and isinstance(obs, (tuple, list)):
            if len(obs) != len(self.keys):
                raise ValueError(f"DictEncoder expects a Tuple observation of {len(self.keys)} entries, got {len(obs)}")
            return list(obs)
        if not (isinstance(obs, Mapping) or hasattr(obs, "batch_size")):
            kind = "a tuple or a mapping with keys '0', '1', ..." if self.is_tuple else "a mapping (dict, TensorDict)"
            raise TypeError(f"DictEncoder takes {kind} of observations, got {type(obs).__name__}")
        present = set(obs.keys())
        missing = [k for k in self.keys if k not in present]
        if missing:
            raise KeyError(f"DictEncoder: observation keys {missing} missing; got {sorted(map(str, present))}")
        return [obs[k] for k in self.keys]

    def forward(self, obs: Any) -> torch.Tensor:
        parts = self._parts(obs)
        feats = [enc(obs_to_tensor(x)) for enc, x in zip(self.encoders.values(), parts)]
        return torch.cat([f.reshape(f.shape[0], -1) for f in feats], dim=-1)

    def numpy_features(self, obs: Any) -> Optional[np.ndarray]:
        """`forward` of a numpy batch in numpy (float32 ``[B, dim]``): each entry's ``numpy_features``,
        concatenated in key order; None when an entry has none (an image, a discrete entry), or for a hook."""
        if not isinstance(obs, Mapping) or self._forward_hooks or self._forward_pre_hooks:
            return None
        feats = []
        for key, enc in zip(self.keys, self.encoders.values()):
            part = getattr(enc, "numpy_features", None)
            got = part(obs[key]) if part is not None and key in obs else None
            if got is None:
                return None
            feats.append(got)
        return feats[0] if len(feats) == 1 else np.concatenate(feats, axis=1)

    def batch_sums(self, obs: Any) -> torch.Tensor:
        """The normalising entries' `ObsEncoder.batch_sums`, concatenated (float64), for all-reduce."""
        sums = [
            enc.batch_sums(obs_to_tensor(x))
            for enc, x in zip(self.encoders.values(), self._parts(obs))
            if getattr(enc, "normalize", False)
        ]
        return torch.cat(sums)

    def update(self, sums: torch.Tensor) -> None:
        """Merge `batch_sums` (summed over ranks) into each normalising entry's statistics."""
        at = 0
        for enc in self.encoders.values():
            if not getattr(enc, "normalize", False):
                continue
            size = 1 + 2 * enc.dim if isinstance(enc, ObsEncoder) else int(enc.batch_sums_size)
            enc.update(sums[at : at + size])
            at += size

    @property
    def batch_sums_size(self) -> int:
        """Length of `batch_sums`."""
        return sum(
            (1 + 2 * e.dim) if isinstance(e, ObsEncoder) else e.batch_sums_size
            for e in self.encoders.values()
            if getattr(e, "normalize", False)
        )


def build_encoder(
    space: Any,
    *,
    cnn: str = "nature",
    normalize: bool = False,
    channels_last: Optional[bool] = None,
    policy_name: str = "policy",
) -> nn.Module:
    """The encoder for ``space``.

    - an image Box (rank 3, or a ``uint8`` rank 2; sides of at least 4): the ``cnn``, which scales ``uint8``
      frames to [0, 1] and reads channels first or last;
    - Box, Discrete, MultiDiscrete, MultiBinary: flat features (`ObsEncoder`; Box optionally normalised);
    - Dict and Tuple: a `DictEncoder`, one of the above per entry, concatenated.

    Every encoder has ``dim`` (its output width) and maps ``[B, *obs_shape]`` to ``[B, dim]`` float32.

    Args:
        space: The observation space.
        cnn: ``"nature"`` or ``"impala"``, for image spaces.
        normalize: Running mean/std normalisation of vector observations.
        channels_last: Channel order of image observations (None: from the shape).
        policy_name: Named in error messages.

    Raises:
        ValueError: an unknown ``cnn``, ``normalize`` with a bare image space, or a space no encoder takes
            (the message names the space and the supported ones).
    """
    if cnn not in CNN_TYPES:
        raise ValueError(f"unknown cnn {cnn!r}; valid: {', '.join(map(repr, CNN_TYPES))}")
    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        return DictEncoder(space, cnn=cnn, normalize=normalize, channels_last=channels_last, policy_name=policy_name)
    if is_image_space(space):
        if normalize:
            raise ValueError(
                f"policy {policy_name!r}: observation normalisation is for vector observations; "
                f"image observations {space_name(space)} are scaled to [0, 1] inside the CNN"
            )
        return CNN_TYPES[cnn](space.shape, channels_last=channels_last)
    return ObsEncoder(space, normalize=normalize, policy_name=policy_name)
