"""CQL: conservative Q-learning for offline data (Kumar et al., 2020), continuous and discrete.

``cql`` (continuous, Box actions) is SAC (`SACPolicy`: its squashed Gaussian actor, twin critics, targets and
temperature, the same code) with CQL(H)'s conservative term added to each critic's loss:

    cql_alpha * ( temp * logsumexp_a (Q(s, a) / temp) - Q(s, a_data) )

the log-sum-exp taken over ``cql_n_actions`` uniform random actions and as many of the current policy at
``s`` and at ``s'``, each with its importance weight (``-log density``) as in the paper's CQL(H) and CORL.
CORL's hyperparameters (the ``cql_*`` presets): ``cql_alpha: 10``, ``cql_n_actions: 10``, ``cql_temp: 1``,
actor Adam at 3e-5 (``optim.lr``), critics at 3e-4 (``q_lr``), ``tau: 0.005``, automatic entropy tuning,
three hidden layers of 256, batch 256; the critic target has no entropy term (``backup_entropy: false``),
and the actor's first ``bc_steps`` updates are behaviour cloning (maximum likelihood of the dataset's action).

``discrete_cql`` (Discrete actions) is DQN (`DQNPolicy`) with the discrete CQL term
``cql_alpha * (logsumexp_a Q(s, a) - Q(s, a_data))`` added to the TD loss (the paper's discrete variant, as
d3rlpy's DiscreteCQL, ``alpha: 1``). Offline its target network is Polyak-averaged every gradient step
(``tau``); ``target_update_interval`` counts env steps, which an offline run does not take, and is refused.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import torch
from pydantic import Field, field_validator

from rlightning.policy.algorithms.dqn import DQNConfig, DQNPolicy
from rlightning.policy.algorithms.networks import action_kind
from rlightning.policy.algorithms.sac import SACConfig, SACPolicy
from rlightning.policy.algorithms.twin_critic import min_target_q
from rlightning.utils.registry import POLICIES

__all__ = ["CQLConfig", "CQLPolicy", "DiscreteCQLConfig", "DiscreteCQLPolicy", "offline_target_interval"]


class CQLConfig(SACConfig):
    """CQL's hyperparameters (``policy.type: cql``): SAC's and the conservative term's."""

    cql_alpha: float = Field(10.0, ge=0)
    """Weight of the conservative term (CORL: 10; 0: SAC)."""
    cql_n_actions: int = Field(10, ge=1)
    """Actions sampled per state for the log-sum-exp (random, policy at s, policy at s')."""
    cql_temp: float = Field(1.0, gt=0)
    """Temperature of the log-sum-exp."""
    backup_entropy: bool = False
    """Subtract the entropy term in the critic target, as SAC does (CORL and the paper's CQL: no)."""
    bc_steps: int = Field(0, ge=0)
    """The actor's first this many updates maximise the dataset actions' likelihood instead (CORL's bc_steps)."""
    policy_frequency: int = Field(1, ge=1)
    """Actor updates every this many critic updates (CQL: every one)."""


@POLICIES.register("cql")
class CQLPolicy(SACPolicy):
    """Conservative Q-learning on SAC for Box actions (see the module docstring)."""

    config_cls = CQLConfig
    """The config class of ``policy.type: cql``."""

    def construct_network(self, env_meta: Any) -> None:
        """SAC's networks; a Discrete action space is refused naming ``discrete_cql``."""
        if action_kind(env_meta.action_space, "cql", ("continuous", "discrete")) == "discrete":
            raise ValueError(
                f"policy 'cql' needs continuous (Box) actions, got {env_meta.action_space!r}; for Discrete "
                "actions use policy.type 'discrete_cql'"
            )
        super().construct_network(env_meta)
        self._actor_updates = 0

    def _conservative_term(self, x: torch.Tensor, next_x: torch.Tensor, q_data: torch.Tensor) -> torch.Tensor:
        """``cql_alpha * (temp * logsumexp(Q / temp) - Q(s, a_data))`` of both critics, summed, mean over rows."""
        cfg = self.config
        n, k = x.shape[0], cfg.cql_n_actions
        scale, bias = self.actor.scale, self.actor.bias
        x_rep = x.repeat_interleave(k, 0)
        with torch.no_grad():
            random_actions = (torch.rand(n * k, self.act_dim, device=x.device) * 2 - 1) * scale + bias
            random_logp = -torch.log(2 * scale).sum() * torch.ones(n * k, device=x.device)  # uniform density
            pi_actions, pi_logp = self.actor.sample_n(x, k)
            next_actions, next_logp = self.actor.sample_n(next_x, k)
        # the three groups of sampled actions in one forward of both critics: [2, 3 * n * k]
        q = self._modules["qf"](x_rep.repeat(3, 1), torch.cat([random_actions, pi_actions, next_actions]))
        q = q - torch.cat([random_logp, pi_logp, next_logp])  # importance weights: minus the log density
        cat = q.reshape(2, 3, n, k).permute(0, 2, 1, 3).reshape(2, n, 3 * k) / cfg.cql_temp  # [2, n, 3k]
        lse = torch.logsumexp(cat, dim=2) * cfg.cql_temp  # [2, n]
        return cfg.cql_alpha * (lse - q_data).mean(1).sum()

    def critic_loss(
        self, ds: Dict[str, torch.Tensor], alpha: float
    ) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]]:
        """SAC's hook: the TD loss (the target without the entropy term unless ``backup_entropy``) plus the
        conservative term; SAC's `train` runs the actor, temperature and target updates after it.

        Returns:
            (loss, the observation features, metrics: q_loss (the TD part), cql_loss, q_value).
        """
        cfg, modules = self.config, self._modules
        with torch.no_grad():
            next_x = self.encoder(ds["next_obs"])
            next_action, next_logp = self.actor(next_x)
            next_q = min_target_q(modules, next_x, next_action)
            if cfg.backup_entropy:
                next_q = next_q - alpha * next_logp
            target = ds["reward"] + (1.0 - ds["terminated"]) * cfg.gamma * next_q
        x = self.encoder(ds["obs"])
        q = modules["qf"](x, ds["action"])  # [2, B]
        td_loss = (q - target).pow(2).mean(1).sum()
        cql_loss = self._conservative_term(x, next_x, q)
        metrics = {"q_loss": td_loss.detach(), "cql_loss": cql_loss.detach(), "q_value": q[0].detach().mean()}
        return td_loss + cql_loss, x, metrics

    def _actor_update(self, x: torch.Tensor) -> Dict[str, float]:
        """SAC's actor and temperature update; during the first ``bc_steps`` the actor maximises the dataset
        actions' likelihood (minus the entropy bonus) instead."""
        self._actor_updates += 1
        if self._actor_updates > self.config.bc_steps:
            return super()._actor_update(x)
        cfg = self.config
        action, logp = self.actor(x)
        data_logp = self.actor.log_prob(x, self.dataset["action"])
        actor_loss = (self.alpha * logp - data_logp).mean()
        self.apply_gradients(
            actor_loss, self._optimizers["actor"], self._actor_params, cfg.optim.max_grad_norm, return_norm=False
        )
        return {"actor_loss": actor_loss.item(), "alpha_loss": 0.0}


class DiscreteCQLConfig(DQNConfig):
    """Discrete CQL's hyperparameters (``policy.type: discrete_cql``): DQN's and the conservative weight."""

    cql_alpha: float = Field(1.0, ge=0)
    """Weight of ``logsumexp_a Q(s, a) - Q(s, a_data)`` in the loss (d3rlpy's DiscreteCQL: 1)."""
    target_update_interval: Optional[int] = None
    """Must stay None: offline, the target network is Polyak-averaged (``tau``) every gradient step."""

    @field_validator("target_update_interval")
    @classmethod
    def _offline_target(cls, v: Optional[int]) -> Optional[int]:
        return offline_target_interval("discrete_cql", v)


def offline_target_interval(policy_name: str, v: Optional[int]) -> Optional[int]:
    """``target_update_interval`` of an offline variant of DQN: None, or a clear error (it counts env steps).

    Raises:
        ValueError: any value but None.
    """
    if v is not None:
        raise ValueError(
            f"{policy_name} learns offline, where no env steps are taken; target_update_interval counts env "
            f"steps (got {v}): leave it None and set tau (the target's Polyak rate per gradient step)"
        )
    return v


@POLICIES.register("discrete_cql")
class DiscreteCQLPolicy(DQNPolicy):
    """Conservative Q-learning on DQN for Discrete actions (see the module docstring)."""

    config_cls = DiscreteCQLConfig
    """The config class of ``policy.type: discrete_cql``."""

    def construct_network(self, env_meta: Any) -> None:
        """DQN's networks; a Box action space is refused naming ``cql``."""
        if action_kind(env_meta.action_space, "discrete_cql", ("continuous", "discrete")) == "continuous":
            raise ValueError(
                f"policy 'discrete_cql' needs Discrete actions, got {env_meta.action_space!r}; for Box actions use "
                "policy.type 'cql'"
            )
        super().construct_network(env_meta)

    def loss(self, batch: Dict[str, Any]) -> Dict[str, torch.Tensor]:
        """DQN's TD loss plus ``cql_alpha * mean(logsumexp_a Q(s, a) - Q(s, a_data))``."""
        out = super().loss(batch)
        q_all = self.q_values(batch["obs"])
        conservative = (torch.logsumexp(q_all, dim=1) - out["q"]).mean()
        out["loss"] = out["loss"] + self.config.cql_alpha * conservative
        return out
