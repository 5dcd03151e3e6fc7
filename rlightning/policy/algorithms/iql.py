"""IQL: implicit Q-learning for offline data (Kostrikov et al., 2021): ``iql`` for Box actions, ``discrete_iql``
for Discrete ones.

Never queries the critics at actions outside the dataset:

- a value network V(s) fitted to the target critics by expectile regression:
  ``|expectile - 1(Q'(s, a) - V(s) < 0)| (Q'(s, a) - V(s))^2`` (Q': the smaller target critic);
- twin critics (`twin_critic`, the code TD3 and SAC use) fitted to ``r + gamma (1 - term) V(s')``, their
  targets Polyak-averaged;
- the actor by advantage-weighted regression: ``-exp(beta (Q'(s, a) - V(s))) log pi(a | s)``, the weights
  clipped at ``max_weight``. The actor is a Gaussian with a tanh mean rescaled to the Box and a
  state-independent log std (CORL's); deterministic acting takes the mean.

The paper's and CORL's hyperparameters (the ``iql_*`` presets): ``expectile: 0.7``, ``beta: 3``,
``max_weight: 100``, ``tau: 0.005``, Adam at 3e-4 for all three, two hidden layers of 256, batch 256,
observations normalised (``norm_obs``).

``discrete_iql`` (Discrete actions) sits on DQN (`DQNPolicy`: its Q network, dueling option, target network
Polyak-averaged every gradient step, batches, TD loss and prioritized weights, the same code) as ``discrete_cql``
does: DQN's target ``r + gamma max_a Q'(s', a)`` becomes ``r + gamma V(s')``, V is fitted by the same expectile
regression to ``Q'(s, a_data)`` of the target network, and a categorical actor (logits from an `mlp`, acting as
BC's: greedy when deterministic, sampled otherwise) by the same advantage-weighted regression of the dataset's
actions. The paper has no discrete experiment; its hyperparameters carry over (expectile 0.7, beta 3, weights
clipped at 100, tau 0.005, Adam at 3e-4) with DQN's single Q network in place of the twin critics.
"""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional, Tuple

import numpy as np
import torch
from pydantic import Field, field_validator
from torch import nn
from torch.nn import functional as F

from rlightning.policy.algorithms.bc import categorical_actions, offline_batch
from rlightning.policy.algorithms.cql import offline_target_interval
from rlightning.policy.algorithms.dqn import DQNConfig, DQNPolicy
from rlightning.policy.algorithms.networks import action_kind, mlp, mlp_forward
from rlightning.policy.algorithms.twin_critic import (
    build_twin_critics,
    critic_parameters,
    min_target_q,
    polyak_pairs,
    polyak_update,
    twin_critic_loss,
)
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.networks import build_encoder, obs_to_tensor
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES

__all__ = [
    "DiscreteIQLConfig",
    "DiscreteIQLPolicy",
    "GaussianMeanActor",
    "IQLConfig",
    "IQLPolicy",
    "advantage_weights",
    "expectile_loss",
]

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0


class IQLConfig(PolicyConfig):
    """IQL's hyperparameters (``policy.type: iql``) on top of the shared `PolicyConfig`."""

    expectile: float = Field(0.7, gt=0, lt=1)
    """Expectile of the value regression (0.5: the mean; towards 1: the best actions in the data)."""
    beta: float = Field(3.0, gt=0)
    """Inverse temperature of the advantage weights."""
    max_weight: float = Field(100.0, gt=0)
    """Clip of the advantage weights ``exp(beta * adv)``."""
    tau: float = Field(0.005, gt=0, le=1)
    """Target critics' Polyak rate."""
    q_lr: float = Field(3e-4, gt=0)
    """Critic and value learning rate (the actor's is ``optim.lr``)."""
    fused_optimizer: bool = True
    """Adam/AdamW through torch's fused kernel (the same update up to float rounding)."""


def expectile_loss(adv: torch.Tensor, expectile: float) -> torch.Tensor:
    """IQL's value loss: ``mean |expectile - 1(adv < 0)| adv^2`` of ``adv = Q'(s, a) - V(s)``."""
    return (torch.abs(expectile - (adv < 0).float()) * adv.pow(2)).mean()


def advantage_weights(adv: torch.Tensor, beta: float, max_weight: float) -> torch.Tensor:
    """IQL's actor weights: ``exp(beta * adv)`` clipped at ``max_weight`` (no gradient)."""
    return torch.exp(beta * adv.detach()).clamp(max=max_weight)


def value_step(policy: Any, x: torch.Tensor, target_q: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """IQL's value update of ``policy`` (its ``value`` net, ``"value"`` optimizer and ``_value_params``) towards
    the expectile of ``target_q`` at the features ``x``; returns ``(adv, v_loss, v)``, ``adv = target_q - V(x)``."""
    cfg = policy.config
    v = policy.value(x)
    adv = target_q - v
    v_loss = expectile_loss(adv, cfg.expectile)
    policy.apply_gradients(
        v_loss, policy._optimizers["value"], policy._value_params, cfg.optim.max_grad_norm, return_norm=False
    )
    return adv, v_loss, v


class GaussianMeanActor(nn.Module):
    """A Gaussian policy: mean ``tanh(mlp(x))`` rescaled to ``[low, high]``, a state-independent log std.

    ``forward(x)`` is the mean (the deterministic action); `log_prob` the density of actions in the Box.
    """

    def __init__(self, in_dim: int, low: np.ndarray, high: np.ndarray, hidden, activation: str) -> None:
        super().__init__()
        act_dim = int(low.shape[0])
        self.net = mlp(in_dim, hidden, act_dim, activation, out_gain=0.01)
        self.log_std = nn.Parameter(torch.zeros(act_dim))
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(mlp_forward(self.net, x)) * self.scale + self.bias

    def std(self) -> torch.Tensor:
        """The standard deviation, in the Box's units."""
        return self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp() * self.scale

    def log_prob(self, x: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``log N(action; mean(x), std)`` summed over action dims."""
        return torch.distributions.Normal(self(x), self.std()).log_prob(action).sum(-1)


@POLICIES.register("iql")
class IQLPolicy(BasePolicy):
    """Implicit Q-learning (see the module docstring)."""

    config_cls = IQLConfig
    """The config class of ``policy.type: iql``."""

    supported_action_spaces = ("continuous",)
    """Action space kinds this policy can act in (checked before any worker starts)."""

    sync_module_names = ("encoder", "actor")
    learns_from_transitions = True
    minibatch_train = True
    REQUIRED_KEYS = ("obs", "action", "reward", "next_obs", "terminated")
    acting_family = "deterministic"
    discrete = False
    action_start = 0

    def construct_network(self, env_meta: EnvMeta) -> None:
        """The actor (every worker); critics, their targets and the value network (train workers).

        Raises:
            ValueError: a Discrete action space (named, with the algorithms that take one), a Box with infinite
                bounds.
        """
        self.env_meta = check_env_meta(env_meta, "iql")
        cfg, space = self.config, env_meta.action_space
        if action_kind(space, "iql", ("continuous", "discrete")) == "discrete":
            raise ValueError(
                f"policy 'iql' needs continuous (Box) actions, got {space!r}; for Discrete actions use "
                "policy.type 'discrete_iql', 'bc' or 'discrete_cql'"
            )
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError(f"policy 'iql' needs finite action bounds, got {space!r}")
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        self.low, self.high, self.act_dim = low, high, int(low.shape[0])
        self.encoder = self.register_module(
            "encoder",
            build_encoder(env_meta.observation_space, cnn=cfg.cnn, normalize=cfg.norm_obs, policy_name="iql"),
        )
        self.actor = self.register_module(
            "actor", GaussianMeanActor(self.encoder.dim, low, high, cfg.hidden_sizes, cfg.activation)
        )
        if not hasattr(self, "np_rng"):
            self.np_rng = np.random.default_rng()
        if self.role_type is not PolicyRole.TRAIN:
            return
        build_twin_critics(self, self.encoder.dim, self.act_dim)
        self.register_module("vf", mlp(self.encoder.dim, cfg.hidden_sizes, 1, cfg.activation))

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """Actor (``optim.lr``), critics and value (``q_lr``) optimizers."""
        fused, q_lr = self.config.fused_optimizer, self.config.q_lr
        self._actor_params = list(self.actor.parameters())
        self._critic_params = critic_parameters(self.modules, self.encoder)
        self._value_params = list(self._modules["vf"].parameters())
        self._polyak = polyak_pairs(self.modules, ("qf",))
        self.register_optimizer("actor", build_optimizer(optim_cfg, self._actor_params, fused=fused))
        self.register_optimizer("critic", build_optimizer(optim_cfg, self._critic_params, lr=q_lr, fused=fused))
        self.register_optimizer("value", build_optimizer(optim_cfg, self._value_params, lr=q_lr, fused=fused))

    @torch.no_grad()
    def compute_actions(self, obs: Any, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """The Gaussian's mean (deterministic) or a sample of it, clipped to the Box."""
        x = self.encoder(obs_to_tensor(obs, self.device))
        mean = self.actor(x)
        action = mean if deterministic else mean + torch.randn_like(mean) * self.actor.std()
        action = torch.minimum(
            torch.maximum(action, self.actor.bias - self.actor.scale), self.actor.bias + self.actor.scale
        )
        return {"action": action.float().cpu().numpy()}

    def update_dataset(self, data: Any) -> None:
        """Take a sampled batch (``obs``, ``action``, ``reward``, ``next_obs``, ``terminated``)."""
        self.dataset = offline_batch(self, data, "iql", self.REQUIRED_KEYS)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """V(s) at features ``x``, ``[B]``."""
        return mlp_forward(self._modules["vf"], x).squeeze(-1)

    def train(self) -> Dict[str, float]:
        """One value, critic and actor update each, then the target averaging.

        Returns:
            v_loss, q_loss, actor_loss, q_value, v_value, adv_weight (the mean advantage weight).
        """
        if self.dataset is None:
            raise RuntimeError("iql.train() called before update_dataset(data)")
        if "critic" not in self._optimizers:
            raise RuntimeError("iql.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds, modules = self.config, self.dataset, self._modules
        x = self.encoder(ds["obs"])
        with torch.no_grad():
            target_q = min_target_q(modules, x, ds["action"])
            next_v = self.value(self.encoder(ds["next_obs"]))
        adv, v_loss, v = value_step(self, x, target_q)
        target = ds["reward"] + (1.0 - ds["terminated"]) * cfg.gamma * next_v
        q_loss, q1 = twin_critic_loss(modules, x, ds["action"], target)
        self.apply_gradients(
            q_loss, self._optimizers["critic"], self._critic_params, cfg.optim.max_grad_norm, return_norm=False
        )
        exp_adv = advantage_weights(adv, cfg.beta, cfg.max_weight)
        actor_loss = -(exp_adv * self.actor.log_prob(x.detach(), ds["action"])).mean()
        self.apply_gradients(
            actor_loss, self._optimizers["actor"], self._actor_params, cfg.optim.max_grad_norm, return_norm=False
        )
        polyak_update(self._polyak, cfg.tau)
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        self.update_count += 1
        self.train_calls += 1
        metrics = {
            "v_loss": v_loss.item(),
            "q_loss": q_loss.item(),
            "actor_loss": actor_loss.item(),
            "q_value": q1.detach().mean().item(),
            "v_value": v.detach().mean().item(),
            "adv_weight": exp_adv.mean().item(),
        }
        self._last_metrics = metrics
        return metrics


class DiscreteIQLConfig(DQNConfig):
    """Discrete IQL's hyperparameters (``policy.type: discrete_iql``): DQN's (the Q network, ``tau``, ``q_lr`` for
    the Q and value networks, ``loss``) and IQL's; the actor learns at ``optim.lr``."""

    expectile: float = Field(0.7, gt=0, lt=1)
    """Expectile of the value regression (0.5: the mean; towards 1: the best actions in the data)."""
    beta: float = Field(3.0, gt=0)
    """Inverse temperature of the advantage weights."""
    max_weight: float = Field(100.0, gt=0)
    """Clip of the advantage weights ``exp(beta * adv)``."""
    loss: Literal["huber", "mse"] = "mse"
    """The Q network's loss against ``r + gamma V(s')``: ``mse`` (IQL's) or ``huber``."""
    target_update_interval: Optional[int] = None
    """Must stay None: offline, the target network is Polyak-averaged (``tau``) every gradient step."""

    @field_validator("target_update_interval")
    @classmethod
    def _offline_target(cls, v: Optional[int]) -> Optional[int]:
        return offline_target_interval("discrete_iql", v)

    @field_validator("double_q")
    @classmethod
    def _no_double_q(cls, v: bool) -> bool:
        if v:
            raise ValueError(
                "discrete_iql's target is r + gamma V(s'), with no greedy next action for double Q to pick: "
                "leave double_q false"
            )
        return v

    @field_validator("gradient_steps")
    @classmethod
    def _one_step(cls, v: int) -> int:
        if v != 1:
            raise ValueError(
                f"discrete_iql makes one gradient step per train() (got gradient_steps={v}); offline, set "
                "train.updates_per_iteration for more steps per iteration"
            )
        return v


@POLICIES.register("discrete_iql")
class DiscreteIQLPolicy(DQNPolicy):
    """Implicit Q-learning on DQN for Discrete actions (see the module docstring)."""

    config_cls = DiscreteIQLConfig
    """The config class of ``policy.type: discrete_iql``."""

    sync_module_names = ("encoder", "actor")
    acting_family = "actor_critic"  # the actor's logits: greedy when deterministic (ActingNet)

    def construct_network(self, env_meta: EnvMeta) -> None:
        """DQN's networks, the categorical actor (every worker) and the value network (train workers).

        Raises:
            ValueError: a Box action space (named, with ``iql``), or any other non-Discrete one.
        """
        if action_kind(env_meta.action_space, "discrete_iql", ("continuous", "discrete")) == "continuous":
            raise ValueError(
                f"policy 'discrete_iql' needs Discrete actions, got {env_meta.action_space!r}; for Box actions use "
                "policy.type 'iql'"
            )
        super().construct_network(env_meta)
        cfg = self.config
        self.discrete = True
        self.actor = self.register_module(
            "actor", mlp(self.encoder.dim, cfg.hidden_sizes, self.n_actions, cfg.activation, out_gain=0.01)
        )
        if self.role_type is PolicyRole.TRAIN:
            self.register_module("vf", mlp(self.encoder.dim, cfg.hidden_sizes, 1, cfg.activation))

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """DQN's Q optimizer (``q_lr``), the value network's (``q_lr``) and the actor's (``optim.lr``)."""
        super().setup_optimizer(optim_cfg)
        cfg = self.config
        self._value_params = list(self._modules["vf"].parameters())
        self._actor_params = list(self.actor.parameters())
        fused = cfg.fused_optimizer
        self.register_optimizer("value", build_optimizer(optim_cfg, self._value_params, lr=cfg.q_lr, fused=fused))
        self.register_optimizer("actor", build_optimizer(optim_cfg, self._actor_params, fused=fused))

    def compute_actions(self, obs: Any, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """The actor's greedy action (deterministic) or a draw from its softmax."""
        return categorical_actions(self, obs, deterministic)

    def value(self, x: torch.Tensor) -> torch.Tensor:
        """V(s) at features ``x``, ``[B]``."""
        return mlp_forward(self._modules["vf"], x).squeeze(-1)

    def train(self) -> Dict[str, float]:
        """One value, Q and actor update each, then the target averaging.

        Returns:
            v_loss, q_loss, actor_loss, q_value, v_value, adv_weight (the mean advantage weight); priority_beta
            with prioritized batches.
        """
        if self.dataset is None:
            raise RuntimeError("discrete_iql.train() called before update_dataset(data)")
        if "actor" not in self._optimizers:
            raise RuntimeError("discrete_iql.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds = self.config, self.dataset
        action = ds["action"].unsqueeze(1)
        x = self.encoder(ds["obs"]).detach()  # a trainable encoder (a CNN) learns from the Q loss only
        with torch.no_grad():
            target_q = self.target_q_values(ds["obs"]).gather(1, action).squeeze(1)
            next_v = self.value(self.encoder(ds["next_obs"]))
        adv, v_loss, v = value_step(self, x, target_q)
        out = self.loss({**ds, "target": ds["reward"] + ds["discount"] * next_v})  # DQN's TD loss and weights
        self.apply_gradients(
            out["loss"], self._optimizers["main"], self._params, cfg.optim.max_grad_norm, return_norm=False
        )
        exp_adv = advantage_weights(adv, cfg.beta, cfg.max_weight)
        logp = F.log_softmax(mlp_forward(self.actor, x), -1).gather(1, action).squeeze(1)
        actor_loss = -(exp_adv * logp).mean()
        self.apply_gradients(
            actor_loss, self._optimizers["actor"], self._actor_params, cfg.optim.max_grad_norm, return_norm=False
        )
        self._update_target(cfg.tau)
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        if ds.get("index") is not None:  # the rows' new priorities, as DQN hands them back
            self.hand_back_priorities(ds, out["td_error"].abs())
        self.update_count += 1
        self.train_calls += 1
        metrics = {
            "v_loss": v_loss.item(),
            "q_loss": out["loss"].item(),
            "actor_loss": actor_loss.item(),
            "q_value": out["q"].detach().mean().item(),
            "v_value": v.detach().mean().item(),
            "adv_weight": exp_adv.mean().item(),
        }
        if ds.get("weight") is not None:
            metrics["priority_beta"] = self.priority_beta
        self._last_metrics = metrics
        return metrics
