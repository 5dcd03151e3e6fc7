"""Action masks: which discrete actions a state allows, applied where a distribution or a greedy choice is made.

An env gives its mask as the Dict observation key ``action_mask`` (PettingZoo's convention; the
``info_action_mask`` wrapper moves gymnasium's ``info["action_mask"]`` there). The mask is therefore part of
every record's observation, so the learner sees the same mask the actor acted under. Encoders skip the key;
policies read it with `action_mask` and apply it with `mask_logits` (stochastic policies: sampling,
log-probabilities and entropy all see it) or `mask_q` (greedy choices and the target's max).

A mask is ``[B, n]`` for ``Discrete(n)`` and ``[B, sum(nvec)]`` (each entry's choices in turn) for
``MultiDiscrete(nvec)``; nonzero / True means allowed. A row that allows nothing is taken as unmasked (an env
with no legal action has nothing to choose from; acting on it must not produce NaNs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Union

import numpy as np
import torch

from rlightning.types.record_keys import ACTION_MASK

__all__ = [
    "ACTION_MASK",
    "LogitMask",
    "action_mask",
    "action_mask_np",
    "mask_logits",
    "mask_logits_np",
    "mask_q",
    "masked_log_softmax",
    "masked_uniform",
]


def action_mask(obs: Any, device: Any = None) -> Optional[torch.Tensor]:
    """The ``action_mask`` entry of a batch of observations as a bool tensor ``[B, n]`` (None without one)."""
    if not (isinstance(obs, Mapping) or hasattr(obs, "batch_size")) or isinstance(obs, torch.Tensor):
        return None
    if ACTION_MASK not in obs.keys():
        return None
    mask = torch.as_tensor(obs[ACTION_MASK], device=device)
    mask = mask.reshape(mask.shape[0], -1) if mask.dim() > 1 else mask.reshape(1, -1)
    return mask.bool()


def action_mask_np(obs: Any) -> Optional[np.ndarray]:
    """`action_mask` as a numpy bool array ``[B, n]``, for acting in numpy (None without one, or for tensors)."""
    if type(obs) is np.ndarray or not isinstance(obs, Mapping) or ACTION_MASK not in obs:  # arrays: per step, fast
        return None
    mask = obs[ACTION_MASK]
    if isinstance(mask, torch.Tensor):
        return None
    mask = np.asarray(mask)
    return (mask.reshape(mask.shape[0], -1) if mask.ndim > 1 else mask.reshape(1, -1)).astype(bool, copy=False)


def _usable(mask: Any, width: int) -> Any:
    """``mask`` (a bool tensor or array ``[B, width]``) with every row that allows nothing allowing everything."""
    if mask.shape[-1] != width:
        raise ValueError(
            f"action_mask has {mask.shape[-1]} entries per row, the policy has {width} action logits; the mask "
            "needs one entry per action (for MultiDiscrete: sum(nvec), each entry's choices in turn)"
        )
    return mask | ~mask.any(-1, keepdims=True)  # a row allowing nothing stays unmasked


def mask_logits(logits: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """``logits`` with the disallowed entries at the dtype's lowest value (probability 0 after a softmax)."""
    if mask is None:
        return logits
    mask = _usable(mask.to(logits.device), logits.shape[-1])
    return logits.masked_fill(~mask, torch.finfo(logits.dtype).min)


@dataclass(frozen=True)
class LogitMask:
    """An action mask prepared once for many `masked_log_softmax` calls (a PPO dataset's, taken per minibatch):
    ``keep`` 1.0 for each allowed entry and 0.0 for each disallowed one (a row that allows nothing all 1.0),
    ``penalty`` 0 and the dtype's lowest value; both ``[B, n]`` in the logits' dtype."""

    keep: torch.Tensor
    penalty: torch.Tensor

    @classmethod
    def of(cls, mask: torch.Tensor, width: int, dtype: torch.dtype = torch.float32) -> LogitMask:
        """The `LogitMask` of a bool ``mask`` ``[B, width]`` (`action_mask`)."""
        keep = _usable(mask, width).to(dtype)
        return cls(keep, (1.0 - keep) * torch.finfo(dtype).min)

    def rows(self, index: Any) -> LogitMask:
        """The mask of the rows ``index`` selects (a minibatch's)."""
        return LogitMask(self.keep[index], self.penalty[index])


def masked_log_softmax(logits: torch.Tensor, mask: Union[None, torch.Tensor, LogitMask]) -> tuple:
    """``log_softmax(mask_logits(logits, mask))`` and the distribution's entropy, differentiable, for learning.

    The same values, computed so that no ``exp`` sees a disallowed entry (torch's CPU ``exp`` takes a slow path
    for arguments that underflow, about 20x on a half-masked ``[512, 8]`` batch, and ``log_softmax``'s forward
    and backward and the entropy's ``exp`` all hit it) and with multiplications and additions by the mask's
    `LogitMask` instead of ``masked_fill`` (five times slower at that size). ``mask``: a bool mask, or its
    `LogitMask` made once beforehand.

    Returns:
        The log-probabilities ``[B, n]`` (disallowed entries at the dtype's lowest value, as `mask_logits` gives
        them; only allowed entries carry gradients) and the entropies ``[B]``.
    """
    if mask is None:
        logp = torch.log_softmax(logits, dim=-1)  # as Categorical.entropy: an entry at -inf adds 0, not nan
        return logp, -(logp.clamp(min=torch.finfo(logp.dtype).min) * logp.exp()).sum(-1)
    if not isinstance(mask, LogitMask):
        mask = LogitMask.of(mask.to(logits.device), logits.shape[-1], logits.dtype)
    elif mask.keep.shape[-1] != logits.shape[-1]:
        _usable(mask.keep, logits.shape[-1])  # raises the width's error
    keep, penalty = mask.keep, mask.penalty
    top = (logits.detach() + penalty).amax(-1, keepdim=True)  # the largest allowed logit
    shifted = (logits - top) * keep  # disallowed entries at 0: finite, their exp cheap, then dropped
    weights = shifted.exp() * keep
    total = weights.sum(-1, keepdim=True)
    logp = shifted - total.log()
    entropy = -(logp * weights).sum(-1) / total.squeeze(-1)
    return logp + penalty, entropy


def mask_logits_np(logits: np.ndarray, mask: Optional[np.ndarray]) -> np.ndarray:
    """`mask_logits` of numpy logits with a numpy mask (`action_mask_np`): the same values."""
    if mask is None:
        return logits
    return np.where(_usable(mask, logits.shape[-1]), logits, np.finfo(logits.dtype).min)


def mask_q(q: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    """Q-values with disallowed actions at ``-inf``: what an argmax or a max over actions reads."""
    if mask is None:
        return q
    mask = _usable(mask.to(q.device), q.shape[-1])
    return q.masked_fill(~mask, float("-inf"))


def masked_uniform(mask: Optional[torch.Tensor], n: int, rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Uniform random actions for the rows ``rows`` (an index array), among each row's allowed actions."""
    if mask is None:
        return rng.integers(0, n, len(rows))
    allowed = _usable(mask[torch.as_tensor(rows, dtype=torch.long)], n).cpu().numpy()
    # the Gumbel-max draw over the allowed entries: uniform among them
    scores = np.where(allowed, rng.random(allowed.shape), -1.0)
    return scores.argmax(-1).astype(np.int64)
