"""What TD3 and SAC share: twin Q critics with Polyak-averaged targets, and their replay batches.

    build_twin_critics(policy, encoder_dim, act_dim)     # qf1, qf2 and frozen copies qf1_target, qf2_target
    ds = replay_dataset(policy, data, "td3")             # obs, action, reward, next_obs, terminated
    next_q = min_target_q(policy.modules, next_x, next_action)
    loss, q1 = twin_critic_loss(policy.modules, x, action, target)
    polyak_update(policy.modules, ("qf1", "qf2"), tau)

Pure torch over a policy's registered modules; never imports Ray.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn
from torch.nn import functional as F

from rlightning.policy.algorithms.networks import mlp
from rlightning.policy.networks import nest_dotted_keys

__all__ = [
    "REPLAY_KEYS",
    "QNetwork",
    "build_twin_critics",
    "critic_parameters",
    "min_target_q",
    "polyak_update",
    "replay_dataset",
    "twin_critic_loss",
]

#: Keys a replay batch of TD3 or SAC needs.
REPLAY_KEYS = ("obs", "action", "reward", "next_obs", "terminated")

CRITICS = ("qf1", "qf2")


class QNetwork(nn.Module):
    """Q(s, a): an MLP over the encoded observation concatenated with the action."""

    def __init__(self, in_dim: int, act_dim: int, hidden, activation: str) -> None:
        super().__init__()
        self.net = mlp(in_dim + act_dim, hidden, 1, activation, out_gain=1.0)

    def forward(self, x: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x, action], dim=-1)).squeeze(-1)


def build_twin_critics(policy: Any, in_dim: int, act_dim: int) -> None:
    """Register ``qf1``, ``qf2`` and their frozen targets (``qf1_target``, ``qf2_target``) on ``policy``."""
    cfg = policy.config
    for name in CRITICS:
        q = policy.register_module(name, QNetwork(in_dim, act_dim, cfg.hidden_sizes, cfg.activation))
        target = policy.register_module(f"{name}_target", QNetwork(in_dim, act_dim, cfg.hidden_sizes, cfg.activation))
        target.load_state_dict(q.state_dict())
        target.requires_grad_(False)


def critic_parameters(modules: Mapping[str, nn.Module], encoder: Optional[nn.Module] = None) -> List[nn.Parameter]:
    """The parameters of both critics and the encoder's trainable ones (one optimizer steps them together).

    A CNN encoder learns from the critic loss only; the actor reads its features detached (as SAC-AE and
    DrQ do). A vector encoder has no trainable parameters.
    """
    params = [p for name in CRITICS for p in modules[name].parameters()]
    if encoder is not None:
        params += [p for p in encoder.parameters() if p.requires_grad]
    return params


def replay_dataset(policy: Any, data: Any, name: str) -> Dict[str, torch.Tensor]:
    """A sampled replay batch as flat tensors on the policy's device (``action`` ``[n, act_dim]``, floats).

    Args:
        policy: The policy (its ``env_meta``, ``device`` and ``act_dim``).
        data: A TensorDict ``[n]`` (or ``[..., n]``, flattened) with `REPLAY_KEYS`.
        name: The algorithm's name, for error messages.

    Raises:
        TypeError: ``data`` is not a TensorDict.
        RuntimeError: the policy has no network yet.
        KeyError: required keys are missing (listed with the keys present).
        ValueError: an empty batch.
    """
    from tensordict import TensorDictBase  # here, not at import: env workers acting with a copy never need it

    if not isinstance(data, TensorDictBase):
        raise TypeError(f"{name}.update_dataset needs a TensorDict, got {type(data).__name__}")
    if policy.env_meta is None:
        raise RuntimeError(f"{name}.update_dataset called before construct_network(env_meta)")
    data = nest_dotted_keys(data)  # dict observations are sampled as "obs.<key>" columns
    missing = [k for k in REPLAY_KEYS if k not in data.keys()]
    if missing:
        raise KeyError(f"{name}.update_dataset: missing keys {missing}; got {sorted(data.keys())}")
    flat = data.reshape(-1) if len(data.batch_size) > 1 else data
    n = int(flat.batch_size.numel())
    if n == 0:
        raise ValueError(f"{name}.update_dataset got an empty batch")
    ds = {k: flat.get(k).to(policy.device) for k in REPLAY_KEYS}
    ds["action"] = ds["action"].reshape(n, policy.act_dim).float()
    ds["reward"] = ds["reward"].reshape(n).float()
    ds["terminated"] = ds["terminated"].reshape(n).float()
    return ds


def min_target_q(modules: Mapping[str, nn.Module], next_x: torch.Tensor, next_action: torch.Tensor) -> torch.Tensor:
    """``min(Q1'(s', a'), Q2'(s', a'))`` of the target critics (the clipped double-Q estimate)."""
    return torch.min(modules["qf1_target"](next_x, next_action), modules["qf2_target"](next_x, next_action))


def twin_critic_loss(
    modules: Mapping[str, nn.Module], x: torch.Tensor, action: torch.Tensor, target: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``MSE(Q1(s, a), y) + MSE(Q2(s, a), y)`` and ``Q1(s, a)``."""
    q1, q2 = modules["qf1"](x, action), modules["qf2"](x, action)
    return F.mse_loss(q1, target) + F.mse_loss(q2, target), q1


@torch.no_grad()
def polyak_update(modules: Mapping[str, nn.Module], names: Sequence[str], tau: float) -> None:
    """``target <- (1 - tau) target + tau online`` for each ``name`` and its ``name_target``."""
    for name in names:
        for p, tp in zip(modules[name].parameters(), modules[f"{name}_target"].parameters()):
            tp.lerp_(p, tau)
