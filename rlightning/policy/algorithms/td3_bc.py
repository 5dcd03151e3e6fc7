"""TD3+BC: TD3 with a behaviour-cloning term in the actor's loss, for offline data (Fujimoto & Gu, 2021).

The critics, targets, target policy smoothing and delayed actor updates are TD3's (`TD3Policy`, the same
code); only the actor's loss changes:

    lambda = alpha / mean |Q_1(s, pi(s))|        (detached)
    actor_loss = -lambda * mean Q_1(s, pi(s)) + mean (pi(s) - a)^2

The paper's and CORL's hyperparameters (the ``td3_bc_*`` presets): ``alpha: 2.5``, ``tau: 0.005``,
``policy_delay: 2``, ``target_policy_noise: 0.2``, ``target_noise_clip: 0.5``, Adam at 3e-4 for both, batch
256, two hidden layers of 256, observations normalised (``norm_obs``; the paper normalises the states by the
dataset's mean and std). Continuous (Box) actions only.
"""

from __future__ import annotations

from typing import Any

import torch
from pydantic import Field
from torch.nn import functional as F

from rlightning.policy.algorithms.td3 import TD3Config, TD3Policy
from rlightning.utils.registry import POLICIES

__all__ = ["TD3BCConfig", "TD3BCPolicy"]


class TD3BCConfig(TD3Config):
    """TD3+BC's hyperparameters (``policy.type: td3_bc``): TD3's and the BC weight ``alpha``."""

    alpha: float = Field(2.5, gt=0)
    """Weight of the Q term against the BC term (the paper's alpha: lambda = alpha / mean |Q|)."""


@POLICIES.register("td3_bc")
class TD3BCPolicy(TD3Policy):
    """TD3+BC: `TD3Policy` whose actor loss also regresses onto the dataset's actions."""

    config_cls = TD3BCConfig
    """The config class of ``policy.type: td3_bc``."""

    def construct_network(self, env_meta: Any) -> None:
        """TD3's networks; a Discrete action space is refused naming the algorithms that take one."""
        from rlightning.policy.algorithms.networks import action_kind

        if action_kind(env_meta.action_space, "td3_bc", ("continuous", "discrete")) == "discrete":
            raise ValueError(
                f"policy 'td3_bc' needs continuous (Box) actions, got {env_meta.action_space!r}; for Discrete "
                "actions use policy.type 'bc', 'discrete_cql' or 'discrete_iql'"
            )
        super().construct_network(env_meta)

    def actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """``-lambda mean Q_1(s, pi(s)) + MSE(pi(s), a)`` on the batch the critic step used."""
        x = self.encoder(obs).detach()
        pi = self.actor(x)
        q1 = self._modules["qf"](x, pi, detach_params=True, critics=slice(0, 1))
        lam = self.config.alpha / q1.abs().mean().detach().clamp_min(1e-6)
        return -lam * q1.mean() + F.mse_loss(pi, self.dataset["action"])
