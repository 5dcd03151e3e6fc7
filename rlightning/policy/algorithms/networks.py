"""Network pieces shared by the built-in algorithms: MLPs, observation encoding and normalisation."""

from __future__ import annotations

import math
from typing import Any, Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from gymnasium import spaces
from torch import nn
from torch.nn.modules import module as _module

ACTIVATIONS = {"tanh": nn.Tanh, "relu": nn.ReLU, "elu": nn.ELU, "gelu": nn.GELU}
# Exactly what these modules' forward computes (ELU and GELU at their default arguments only).
_LAYER_FNS = {nn.Tanh: torch.tanh, nn.ReLU: torch.relu}


def mlp(
    in_dim: int,
    hidden_sizes: Sequence[int],
    out_dim: int,
    activation: str = "tanh",
    out_gain: float = 1.0,
) -> nn.Sequential:
    """An MLP with orthogonal init (hidden gain sqrt(2), output gain ``out_gain``, zero biases)."""
    act = ACTIVATIONS[activation]
    layers, last = [], in_dim
    for width in hidden_sizes:
        layers += [_linear(last, width, math.sqrt(2)), act()]
        last = width
    layers.append(_linear(last, out_dim, out_gain))
    return nn.Sequential(*layers)


def mlp_forward(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``net(x)`` for an `mlp`, calling each layer's function directly (acting is per step, hot).

    On CartPole-sized batches the per-module call machinery costs as much as the arithmetic:
    this halves an MLP forward at 8 rows. Anything but a plain ``nn.Sequential`` of Linear and
    Tanh/ReLU layers, or a network with forward hooks (its own, its layers' or global ones),
    goes through ``net(x)`` as usual, so the result and every hook are the same either way.
    """
    if type(net) is not nn.Sequential or _module._global_forward_hooks or _module._global_forward_pre_hooks:
        return net(x)
    if net._forward_hooks or net._forward_pre_hooks:
        return net(x)
    for layer in net._modules.values():
        if layer._forward_hooks or layer._forward_pre_hooks:
            return net(x)  # nothing computed yet is kept: the whole forward runs the usual way
    for layer in net._modules.values():
        kind = type(layer)
        if kind is nn.Linear:
            params = layer._parameters  # a dict lookup: Module.__getattr__ is slow per step
            x = F.linear(x, params["weight"], params["bias"])
        elif kind in _LAYER_FNS:
            x = _LAYER_FNS[kind](x)
        else:
            x = layer(x)
    return x


def categorical_draw(logp: torch.Tensor) -> torch.Tensor:
    """One draw per row of the categorical distributions with log-probabilities ``logp`` ``[..., K]``.

    The Gumbel-max draw: the argmax of ``logp`` plus Gumbel noise ``-log(-log(u))``, ``u`` uniform.
    Acting draws a handful of rows per step, where ``torch.multinomial`` (what ``Categorical.sample``
    calls) costs two to three times these five small ops. The distribution is the same; the draws
    for a given seed are not (another use of the generator). An action of probability 0 (``logp``
    ``-inf``) is never drawn.

    Returns:
        int64 ``[...]`` in ``0 .. K - 1``.
    """
    return (logp - torch.rand_like(logp).log_().neg_().log_()).argmax(-1)


def _linear(in_dim: int, out_dim: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def space_name(space: Any) -> str:
    """A short description of a gymnasium space for error messages."""
    return repr(space) if space is not None else "None"


def obs_dim(space: Any, policy_name: str) -> int:
    """Flat input size for a vector observation space.

    Box: flattened; Discrete: one-hot; MultiDiscrete: one one-hot per entry, concatenated;
    MultiBinary: its bits as floats.

    Raises:
        ValueError: any other space (Dict and Tuple spaces go to `build_encoder`).
    """
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape)) if space.shape else 1
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    if isinstance(space, spaces.MultiDiscrete):
        return int(np.sum(space.nvec))
    if isinstance(space, spaces.MultiBinary):
        return int(np.prod(space.shape))
    raise ValueError(
        f"policy {policy_name!r} encodes Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple observation "
        f"spaces, got {space_name(space)}; convert it in the env (an observation wrapper in env.wrappers)"
    )


#: Action space kinds, as ``supported_action_spaces`` and `action_kind` name them.
ACTION_KINDS = {
    "discrete": "Discrete",
    "multi_discrete": "MultiDiscrete",
    "multi_binary": "MultiBinary",
    "continuous": "1-D Box",
}


def action_kind(space: Any, policy_name: str, allowed: Tuple[str, ...]) -> str:
    """The kind of an action space (a key of `ACTION_KINDS`), checked against what the policy supports.

    Raises:
        ValueError: a space of no kind, or of a kind the policy does not support (named with the space).
    """
    if isinstance(space, spaces.Discrete):
        kind = "discrete"
    elif isinstance(space, spaces.MultiDiscrete):
        kind = "multi_discrete"
    elif isinstance(space, spaces.MultiBinary):
        kind = "multi_binary"
    elif isinstance(space, spaces.Box) and len(space.shape) == 1:
        kind = "continuous"
    else:
        kind = None
    if kind is None:
        names = ", ".join(ACTION_KINDS[a] for a in allowed)
        raise ValueError(f"policy {policy_name!r} supports {names} action spaces, got {space_name(space)}")
    if kind not in allowed:
        need = " or ".join(f"a {a.replace('_', '-')} ({ACTION_KINDS[a].replace('1-D ', '')})" for a in allowed)
        raise ValueError(f"policy {policy_name!r} needs {need} action space, got {kind} {space_name(space)}")
    return kind


class RunningMeanStd(nn.Module):
    """Running mean and variance (float64 buffers, so they travel with the weights)."""

    def __init__(self, shape: Tuple[int, ...], epsilon: float = 1e-4) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(epsilon, dtype=torch.float64))

    @torch.no_grad()
    def update_from_sums(self, count: float, total: torch.Tensor, total_sq: torch.Tensor) -> None:
        """Merge a batch given by its size, sum and sum of squares."""
        if count <= 0:
            return
        batch_mean = total / count
        batch_var = (total_sq / count - batch_mean**2).clamp_min(0.0)
        delta = batch_mean - self.mean
        new_count = self.count + count
        m2 = self.var * self.count + batch_var * count + delta**2 * self.count * count / new_count
        self.mean += delta * count / new_count
        self.var.copy_(m2 / new_count)
        self.count.copy_(new_count)


class ObsEncoder(nn.Module):
    """Turns raw observations into flat float32 features, optionally normalised.

    Args:
        space: The observation space (Box, Discrete, MultiDiscrete or MultiBinary).
        normalize: Keep running mean/std statistics and normalise with them (Box only).
        clip: Clip normalised features to ``[-clip, clip]``.
    """

    def __init__(self, space: Any, normalize: bool = False, clip: float = 10.0, policy_name: str = "policy") -> None:
        super().__init__()
        self.dim = obs_dim(space, policy_name)
        self.discrete = isinstance(space, spaces.Discrete)
        self.start = int(space.start) if self.discrete else 0
        self.nvec = None
        if isinstance(space, spaces.MultiDiscrete):
            # one-hot per entry: entry i's value v lights column offset_i + v - start_i
            nvec = np.asarray(space.nvec).reshape(-1)
            offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]]) - np.asarray(space.start).reshape(-1)
            self.nvec = tuple(int(v) for v in nvec)
            self.register_buffer("offsets", torch.as_tensor(offsets, dtype=torch.long), persistent=False)
        self.normalize = bool(normalize) and isinstance(space, spaces.Box)
        self.clip = float(clip)
        self.rms = RunningMeanStd((self.dim,)) if self.normalize else None

    def flat(self, obs: torch.Tensor) -> torch.Tensor:
        """Raw observations [B, ...] -> unnormalised features [B, dim]."""
        if self.discrete:
            idx = obs.reshape(-1).long() - self.start
            return nn.functional.one_hot(idx, self.dim).float()
        if self.nvec is not None:
            idx = obs.reshape(obs.shape[0], len(self.nvec)).long() + self.offsets
            return torch.zeros(obs.shape[0], self.dim, device=obs.device).scatter_(1, idx, 1.0)
        return obs.reshape(obs.shape[0], -1).float()

    def numpy_features(self, obs: Any) -> Optional[np.ndarray]:
        """`forward` of a numpy batch of Box observations in numpy (float32 ``[B, dim]``), for acting without
        torch ops (`rlightning.policy.algorithms.numpy_acting`); None for other spaces, other inputs or a hook."""
        if (
            type(obs) is not np.ndarray
            or obs.ndim < 1
            or self.discrete
            or self.nvec is not None
            or self._forward_hooks
            or self._forward_pre_hooks
            or obs.dtype.kind not in "biuf"
        ):
            return None
        x = obs.reshape(obs.shape[0], -1)
        if x.shape[1] != self.dim:
            return None
        if self.rms is None:
            return x if x.dtype == np.float32 else x.astype(np.float32)
        if self.rms.mean.device.type != "cpu":
            return None
        mean, var = self.rms.mean.detach().numpy(), self.rms.var.detach().numpy()  # live views of the buffers
        z = (x.astype(np.float64) - mean) / np.sqrt(var + 1e-8)
        np.clip(z, -self.clip, self.clip, out=z)
        return z.astype(np.float32)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        x = self.flat(obs)
        if self.rms is None:
            return x
        x = (x.double() - self.rms.mean) / torch.sqrt(self.rms.var + 1e-8)
        return x.clamp(-self.clip, self.clip).float()

    def batch_sums(self, obs: torch.Tensor) -> torch.Tensor:
        """[count, sum..., sum_sq...] of a batch of raw observations (float64), for all-reduce."""
        x = self.flat(obs).double()
        count = torch.tensor([float(x.shape[0])], dtype=torch.float64, device=x.device)
        return torch.cat([count, x.sum(0), (x * x).sum(0)])

    def update(self, sums: torch.Tensor) -> None:
        """Merge batch sums from `batch_sums` (summed over ranks) into the running statistics."""
        if self.rms is None:
            return
        d = self.dim
        self.rms.update_from_sums(float(sums[0]), sums[1 : 1 + d], sums[1 + d : 1 + 2 * d])


class Progress(nn.Module):
    """The env steps the learner was last told of (a buffer, so it travels to acting workers with the weights)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("env_steps", torch.zeros((), dtype=torch.float64))
