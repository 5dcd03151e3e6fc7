"""Action heads of stochastic policies: the distribution for each action space kind.

    head = ActionHead(env_meta.action_space, "ppo", ("discrete", "multi_discrete", "multi_binary", "continuous"))
    actor = head.build_actor(encoder.dim, hidden_sizes, "tanh")      # logits, or a Gaussian's mean and log std
    dist = head.distribution(actor(features))
    sample = head.mode(dist) if deterministic else dist.sample()
    env_action = head.to_env(sample)                                # what env.step takes
    log_prob, entropy = head.log_prob_entropy(dist, head.from_record(record_action, n))

| space | distribution | sample / record layout |
|---|---|---|
| ``Discrete(n, start)`` | Categorical over n logits | ``[B]`` int64 (env: ``+ start``) |
| ``MultiDiscrete(nvec, start)`` | one Categorical per entry | ``[B, *nvec.shape]`` int64 (env: ``+ start``) |
| ``MultiBinary(shape)`` | one Bernoulli per bit | ``[B, *shape]`` int8 |
| 1-D ``Box(low, high)`` | diagonal Gaussian, state-independent log std | ``[B, d]`` float32 (env: clipped) |

Log-probabilities and entropies are summed over an action's entries (a joint, factorised distribution).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn
from torch.distributions import Bernoulli, Categorical, Normal

from rlightning.policy.algorithms.networks import action_kind, mlp
from rlightning.policy.networks.masks import mask_logits

__all__ = ["ActionHead", "GaussianActor", "MultiCategorical"]


class GaussianActor(nn.Module):
    """Mean MLP with a state-independent log standard deviation."""

    def __init__(self, in_dim: int, act_dim: int, hidden, activation: str) -> None:
        super().__init__()
        self.mean = mlp(in_dim, hidden, act_dim, activation, out_gain=0.01)
        self.log_std = nn.Parameter(torch.zeros(act_dim))

    def forward(self, x: torch.Tensor) -> Normal:
        mean = self.mean(x)
        return Normal(mean, self.log_std.exp().expand_as(mean))


class MultiCategorical:
    """Independent categoricals over the entries of a MultiDiscrete action, from concatenated logits.

    Args:
        logits: ``[B, sum(nvec)]``.
        nvec: Choices per entry (flattened order).
    """

    def __init__(self, logits: torch.Tensor, nvec: Sequence[int]) -> None:
        self.nvec = tuple(int(n) for n in nvec)
        self.dists = [Categorical(logits=part) for part in torch.split(logits, self.nvec, dim=-1)]

    def sample(self) -> torch.Tensor:
        """``[B, len(nvec)]`` int64."""
        return torch.stack([d.sample() for d in self.dists], dim=-1)

    def mode(self) -> torch.Tensor:
        """The most likely choice of each entry, ``[B, len(nvec)]``."""
        return torch.stack([d.logits.argmax(-1) for d in self.dists], dim=-1)

    def log_prob(self, action: torch.Tensor) -> torch.Tensor:
        """Joint log-probability ``[B]`` of ``[B, len(nvec)]`` choices."""
        return torch.stack([d.log_prob(action[..., i]) for i, d in enumerate(self.dists)], dim=-1).sum(-1)

    def entropy(self) -> torch.Tensor:
        """Joint entropy ``[B]``."""
        return torch.stack([d.entropy() for d in self.dists], dim=-1).sum(-1)


class ActionHead:
    """The action distribution of one action space (see the module table); holds no parameters.

    Args:
        space: The action space.
        policy_name: Named in error messages.
        allowed: Kinds the policy supports (keys of `rlightning.policy.algorithms.networks.ACTION_KINDS`).

    Raises:
        ValueError: a space of another kind (the message names it and the supported ones).
    """

    def __init__(self, space: Any, policy_name: str, allowed: Tuple[str, ...]) -> None:
        self.kind = action_kind(space, policy_name, allowed)
        self.space = space
        if self.kind == "discrete":
            self.start, self.out_dim, self.shape = int(space.start), int(space.n), ()
        elif self.kind == "multi_discrete":
            self.shape = tuple(space.nvec.shape)
            self.nvec = tuple(int(n) for n in np.asarray(space.nvec).reshape(-1))
            self.start = np.asarray(space.start, dtype=np.int64).reshape(self.shape)
            self.out_dim = int(sum(self.nvec))
        elif self.kind == "multi_binary":
            self.shape = tuple(int(s) for s in np.atleast_1d(space.shape))
            self.out_dim = int(np.prod(self.shape))
        else:
            self.shape = tuple(space.shape)
            self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
            self.out_dim = int(space.shape[0])

    def build_actor(self, in_dim: int, hidden: Sequence[int], activation: str) -> nn.Module:
        """The actor network: an MLP of logits (small output gain), or a `GaussianActor` for a Box."""
        if self.kind == "continuous":
            return GaussianActor(in_dim, self.out_dim, hidden, activation)
        return mlp(in_dim, hidden, self.out_dim, activation, out_gain=0.01)

    def distribution(self, out: Any, mask: Optional[torch.Tensor] = None):
        """The distribution of the actor's output ``out``; ``mask`` (``[B, out_dim]`` bool, `masks`) makes the
        disallowed choices of a Discrete or MultiDiscrete action impossible.

        Raises:
            ValueError: a mask for another kind of action.
        """
        if mask is not None:
            if self.kind not in ("discrete", "multi_discrete"):
                raise ValueError(
                    f"an action_mask applies to Discrete and MultiDiscrete actions, not to {self.kind} actions "
                    f"{self.space}; remove the observation's 'action_mask' key"
                )
            out = mask_logits(out, mask)
        if self.kind == "discrete":
            return Categorical(logits=out)
        if self.kind == "multi_discrete":
            return MultiCategorical(out, self.nvec)
        if self.kind == "multi_binary":
            return Bernoulli(logits=out)
        return out  # GaussianActor already gives a Normal

    def mode(self, dist: Any) -> torch.Tensor:
        """The most likely action (deterministic acting)."""
        if self.kind == "discrete":
            return dist.logits.argmax(-1)
        if self.kind == "multi_discrete":
            return dist.mode()
        if self.kind == "multi_binary":
            return (dist.logits > 0).float()
        return dist.mean

    def log_prob_entropy(self, dist: Any, action: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """Log-probability and entropy per row ``[B]`` (summed over the action's entries)."""
        if self.kind in ("discrete", "multi_discrete"):
            return dist.log_prob(action), dist.entropy()
        return dist.log_prob(action).sum(-1), dist.entropy().sum(-1)

    def to_env(self, sample: torch.Tensor, as_tensor: bool = False) -> Any:
        """A sample as the env takes it: offset by ``start``, reshaped to the space, clipped to a Box; a numpy
        array, or with ``as_tensor`` a tensor on the sample's device (a device-resident env: nothing leaves it)."""
        n = sample.shape[0]
        if self.kind == "discrete":
            out = sample.long() + self.start
        elif self.kind == "multi_discrete":
            out = sample.reshape(n, *self.shape).long() + torch.as_tensor(self.start, device=sample.device)
        elif self.kind == "multi_binary":
            out = sample.reshape(n, *self.shape).to(torch.int8)
        else:
            low = torch.as_tensor(self.low, device=sample.device)
            out = torch.clamp(sample.float(), low, torch.as_tensor(self.high, device=sample.device))
        return out if as_tensor else out.cpu().numpy()

    def from_record(self, action: torch.Tensor, n: int) -> torch.Tensor:
        """The record's actions ``[n, ...]`` as `log_prob_entropy` takes them."""
        if self.kind == "discrete":
            return action.reshape(n).long() - self.start
        if self.kind == "multi_discrete":
            start = torch.as_tensor(self.start.reshape(-1), device=action.device)
            return action.reshape(n, len(self.nvec)).long() - start
        if self.kind == "multi_binary":
            return action.reshape(n, self.out_dim).float()
        return action.reshape(n, self.out_dim).float()
