"""Generalized State-Dependent Exploration (gSDE) for a tanh-squashed Gaussian actor.

Raffin et al. 2021, "Smooth Exploration for Robotic Reinforcement Learning": the exploration noise of an
action is a linear function of the actor's latent features ``theta(s)`` (the last hidden layer),

    eps(s) = theta(s) @ W,        W[i, j] ~ N(0, sigma[i, j]^2),

with an exploration matrix ``W`` drawn now and then (not every step), so that the noise changes smoothly with
the state and stays the same for the same state until ``W`` is drawn again. For a given ``s`` and a random
``W`` the pre-squash action ``u = mu(s) + eps(s)`` is Gaussian with the per-dimension variance
``(theta(s)^2) @ sigma^2``; the action is ``tanh(u)`` rescaled to the Box, and its log-probability is the
Gaussian's minus the log-Jacobian of the squash.

    noise = StateDependentNoise(latent_dim=64, act_dim=1, log_std_init=-3.67)
    actor = GSDEActor(encoder.dim, low, high, [64, 64], "relu", noise)
    w = actor.noise.sample_matrices(n)             # [n, 64, 1]: one matrix per acting row
    action, log_prob = actor(x, exploration_matrix=w)
    action, _ = actor(x, deterministic=True)       # tanh(mu(s)), rescaled

``sigma`` is learned (``log_std``, one per latent feature and action dim, or one per latent feature with
``full_std=False``); ``use_expln`` maps ``log_std`` to a std that grows like ``log`` above 0 instead of
``exp``. The latent features are detached in the noise unless ``learn_features`` (the paper's default).
"""

from __future__ import annotations

import math
from typing import Optional, Sequence, Tuple

import numpy as np
import torch
from torch import nn

from rlightning.policy.algorithms.networks import mlp, mlp_forward

__all__ = ["GSDEActor", "StateDependentNoise", "squashed_log_prob"]

#: Added to the variance (under the square root) and to the squash Jacobian, against log(0).
EPS = 1e-6


def squashed_log_prob(
    u: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, scale: torch.Tensor, eps: float = EPS
) -> torch.Tensor:
    """Log-density ``[B]`` of ``scale * tanh(u) + bias`` where ``u ~ N(mean, var)`` per dim (summed over dims)."""
    gauss = -0.5 * (u - mean) ** 2 / var - 0.5 * torch.log(var) - 0.5 * math.log(2 * math.pi)
    y = torch.tanh(u)
    return (gauss - torch.log(scale * (1 - y**2) + eps)).sum(-1)


class StateDependentNoise(nn.Module):
    """The learned std of gSDE's exploration matrix, and the noise and variance it gives latent features.

    Args:
        latent_dim: Width of the latent features ``theta(s)``.
        act_dim: Action dimensions.
        log_std_init: Initial ``log_std`` (every entry).
        full_std: One ``log_std`` per (latent feature, action dim); False: one per latent feature, shared by
            the action dims.
        use_expln: ``std = exp(log_std)`` below 0 and ``log1p(log_std) + 1`` above (grows slowly); False: ``exp``.
        learn_features: Let the noise's gradients reach the latent features (False: they are detached).

    Raises:
        ValueError: a non-positive ``latent_dim`` or ``act_dim``, or a non-finite ``log_std_init``.
    """

    def __init__(
        self,
        latent_dim: int,
        act_dim: int,
        log_std_init: float = -2.0,
        full_std: bool = True,
        use_expln: bool = False,
        learn_features: bool = False,
    ) -> None:
        super().__init__()
        if latent_dim < 1 or act_dim < 1:
            raise ValueError(f"StateDependentNoise needs latent_dim >= 1 and act_dim >= 1, got {latent_dim}, {act_dim}")
        if not math.isfinite(log_std_init):
            raise ValueError(f"StateDependentNoise: log_std_init must be finite, got {log_std_init!r}")
        self.latent_dim, self.act_dim = int(latent_dim), int(act_dim)
        self.full_std, self.use_expln, self.learn_features = bool(full_std), bool(use_expln), bool(learn_features)
        self.log_std = nn.Parameter(torch.full((latent_dim, act_dim if full_std else 1), float(log_std_init)))

    def std(self) -> torch.Tensor:
        """``sigma``, ``[latent_dim, act_dim]`` (a shared column expanded when not ``full_std``)."""
        log_std = self.log_std
        if self.use_expln:
            below = torch.exp(torch.clamp(log_std, max=0.0))
            above = torch.log1p(torch.clamp(log_std, min=0.0)) + 1.0
            std = torch.where(log_std <= 0, below, above)
        else:
            std = log_std.exp()
        return std.expand(self.latent_dim, self.act_dim)

    def sample_matrices(self, n: Optional[int] = None) -> torch.Tensor:
        """Exploration matrices ``W = sigma * z``, ``z ~ N(0, 1)``: ``[latent, act]`` or ``[n, latent, act]``.

        Reparameterised: gradients reach ``log_std`` through ``W``.
        """
        std = self.std()
        shape = std.shape if n is None else (int(n), *std.shape)
        return std * torch.randn(shape, dtype=std.dtype, device=std.device)

    def features(self, latent: torch.Tensor) -> torch.Tensor:
        """The latent features the noise reads (detached unless ``learn_features``)."""
        return latent if self.learn_features else latent.detach()

    def variance(self, latent: torch.Tensor) -> torch.Tensor:
        """Per-dimension variance of the noise, ``(theta^2) @ sigma^2 + EPS``, ``[B, act_dim]``."""
        theta = self.features(latent)
        return (theta**2) @ (self.std() ** 2) + EPS

    def noise(self, latent: torch.Tensor, matrices: torch.Tensor) -> torch.Tensor:
        """``theta(s) @ W``, ``[B, act_dim]``: one shared ``[latent, act]`` matrix, or one per row ``[B, latent, act]``.

        Raises:
            ValueError: matrices of another shape, or one per row for a batch of another size.
        """
        theta = self.features(latent)
        if matrices.dim() == 2 and tuple(matrices.shape) == (self.latent_dim, self.act_dim):
            return theta @ matrices
        if matrices.dim() == 3 and tuple(matrices.shape[1:]) == (self.latent_dim, self.act_dim):
            if matrices.shape[0] != theta.shape[0]:
                raise ValueError(
                    f"gSDE: {matrices.shape[0]} exploration matrices for a batch of {theta.shape[0]} rows "
                    "(one per row, or one shared [latent_dim, act_dim] matrix)"
                )
            return torch.bmm(theta.unsqueeze(1), matrices).squeeze(1)
        raise ValueError(
            f"gSDE: exploration matrices must be [{self.latent_dim}, {self.act_dim}] or "
            f"[batch, {self.latent_dim}, {self.act_dim}], got {list(matrices.shape)}"
        )


class GSDEActor(nn.Module):
    """Squashed Gaussian actor with gSDE noise: ``tanh(mu(s) + theta(s) @ W)`` rescaled to ``[low, high]``.

    ``theta`` is the last hidden layer of an MLP over the encoded observation (the encoded observation
    itself when ``hidden`` is empty); ``mu`` a linear layer on it, clipped to ``[-clip_mean, clip_mean]``
    (0: not clipped) so that ``tanh`` does not saturate.

    Args:
        in_dim: Width of the encoded observation.
        low, high: The action Box's bounds.
        hidden: Hidden layer widths.
        activation: Hidden activation (a key of ``ACTIVATIONS``).
        noise: The `StateDependentNoise` (its ``latent_dim`` is ``hidden[-1]``, or ``in_dim``).
        clip_mean: Bound of the pre-squash mean (0: none).

    Raises:
        ValueError: a ``noise`` whose sizes do not match the network, or a negative ``clip_mean``.
    """

    def __init__(
        self,
        in_dim: int,
        low: np.ndarray,
        high: np.ndarray,
        hidden: Sequence[int],
        activation: str,
        noise: StateDependentNoise,
        clip_mean: float = 2.0,
    ) -> None:
        super().__init__()
        act_dim = int(low.shape[0])
        hidden = list(hidden)
        latent_dim = hidden[-1] if hidden else in_dim
        if (noise.latent_dim, noise.act_dim) != (latent_dim, act_dim):
            raise ValueError(
                f"GSDEActor: noise built for latent {noise.latent_dim} x action {noise.act_dim}, the network has "
                f"latent {latent_dim} x action {act_dim}"
            )
        if clip_mean < 0:
            raise ValueError(f"GSDEActor: clip_mean must be >= 0 (0: no clipping), got {clip_mean!r}")
        # The hidden layers of an `mlp` (its output layer dropped): Linear + activation per width.
        self.latent = nn.Sequential(*list(mlp(in_dim, hidden, 1, activation))[:-1]) if hidden else nn.Identity()
        self.mu = mlp(latent_dim, [], act_dim, activation, out_gain=0.01)
        self.noise = noise
        self.clip_mean = float(clip_mean)
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def mean_and_latent(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """The pre-squash mean ``mu(s)`` ``[B, act_dim]`` and the latent features ``theta(s)`` ``[B, latent_dim]``."""
        latent = mlp_forward(self.latent, x)  # the layers' functions called directly: per-module calls cost
        mean = mlp_forward(self.mu, latent)  # about as much as a 512-row layer's arithmetic here
        if self.clip_mean > 0:
            mean = torch.clamp(mean, -self.clip_mean, self.clip_mean)
        return mean, latent

    def forward(
        self, x: torch.Tensor, deterministic: bool = False, exploration_matrix: Optional[torch.Tensor] = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """(action in the Box ``[B, act_dim]``, log-probability ``[B]``).

        Args:
            x: Encoded observations ``[B, in_dim]``.
            deterministic: Act with the mean (``tanh(mu(s))``); its log-probability is the density there.
            exploration_matrix: ``W``: one shared ``[latent, act]``, or one per row. None: each row's noise an
                independent draw of its state's noise distribution, ``N(0, var(s))`` (what a matrix of its own
                per row gives, as a training batch wants), drawn as ``sqrt(var(s)) * N(0, 1)``: ``[B, act]``
                normals instead of ``B x latent x act`` and a batched product, a tenth of a 512-row SAC update
                on a CPU. The reparameterised gradient of ``log_std`` then flows through ``var`` rather than
                through ``W``: another unbiased estimate of the same gradient.
        """
        mean, latent = self.mean_and_latent(x)
        var = self.noise.variance(latent)
        if deterministic:
            u = mean
        elif exploration_matrix is None:
            u = mean + var.sqrt() * torch.randn_like(mean)
        else:
            u = mean + self.noise.noise(latent, exploration_matrix)
        log_prob = squashed_log_prob(u, mean, var, self.scale)
        return torch.tanh(u) * self.scale + self.bias, log_prob
