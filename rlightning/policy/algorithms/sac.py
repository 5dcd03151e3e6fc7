"""SAC: soft actor-critic for continuous (Box) actions.

A tanh-squashed Gaussian actor rescaled to the Box bounds, twin Q networks
with Polyak-averaged target copies, and automatic entropy tuning. The encoder
follows the observation space (`build_encoder`: MLP features, a CNN, a Dict
encoder); a trainable one learns from the critic loss, the actor reads its
features detached (as in SAC-AE and DrQ). Eval
workers build only the encoder and the actor (what weight sync sends).

With ``use_sde`` the actor explores with generalized State-Dependent Exploration
(`rlightning.policy.networks.gsde`): the noise is the actor's latent features
times an exploration matrix drawn per acting row, kept for ``sde_sample_freq``
acting steps (-1: until new weights arrive, i.e. for one collection phase),
with a learned std (``log_std_init``). The matrix rule runs in whichever copy
acts (an eval worker, or an env worker's copy); deterministic acting takes the
mean. In training every sampled row draws its own matrix.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional, Tuple

import numpy as np
import torch
from pydantic import Field, field_validator
from torch import nn

from rlightning.policy.algorithms.networks import action_kind, mlp
from rlightning.policy.algorithms.twin_critic import (
    REPLAY_KEYS,
    build_twin_critics,
    critic_parameters,
    min_target_q,
    polyak_pairs,
    polyak_update,
    replay_dataset,
    twin_critic_loss,
    upgrade_twin_critic_checkpoint,
)
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.networks import build_encoder, obs_to_tensor
from rlightning.policy.networks.gsde import GSDEActor, StateDependentNoise
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class SACConfig(PolicyConfig):
    """SAC's hyperparameters (``policy.type: sac``) on top of the shared `PolicyConfig`."""

    tau: float = Field(0.005, gt=0, le=1)
    """Target network soft-update rate."""
    alpha: float = Field(0.2, gt=0)
    """Initial entropy temperature."""
    autotune_alpha: bool = True
    """Learn the temperature towards ``target_entropy``."""
    target_entropy: Optional[float] = None
    """Target entropy (None: minus the action dimension)."""
    q_lr: Optional[float] = Field(None, gt=0)
    """Critic (and temperature) learning rate (None: ``optim.lr``)."""
    policy_frequency: int = Field(2, ge=1)
    """Actor updates every this many critic updates."""
    use_sde: bool = False
    """Explore with gSDE (Raffin et al. 2021) instead of a state-dependent Gaussian's independent noise."""
    sde_sample_freq: int = -1
    """gSDE: draw new exploration matrices every this many acting steps (-1: only when new weights arrive,
    i.e. once per collection phase after training began; before the first sync one matrix serves)."""
    log_std_init: float = -3.0
    """gSDE: initial log std of the exploration matrix's entries."""
    full_std: bool = True
    """gSDE: one std per (latent feature, action dim); False: one per latent feature."""
    use_expln: bool = False
    """gSDE: std = expln(log_std) (exp below 0, log1p + 1 above), which grows slowly; False: exp."""
    sde_learn_features: bool = False
    """gSDE: the noise's gradients reach the actor's latent features (False: detached, as in the paper)."""
    sde_mean_bound: float = Field(2.0, ge=0)
    """gSDE: the pre-squash mean is clipped to [-sde_mean_bound, sde_mean_bound] (0: not clipped)."""
    fused_optimizer: bool = True
    """Adam/AdamW through torch's fused kernel (one kernel per step instead of a loop of small ops per
    parameter tensor, which torch's default runs on CPU): the same update up to float rounding, so a seeded
    run differs in its last bits from one without it. False: torch's default implementation. Other
    optimizers are unaffected."""

    @field_validator("sde_sample_freq")
    @classmethod
    def _check_sample_freq(cls, v: int) -> int:
        if v == 0 or v < -1:
            raise ValueError(f"sde_sample_freq must be -1 (once per collection phase) or >= 1 steps, got {v}")
        return v


class SquashedGaussianActor(nn.Module):
    """Gaussian over pre-squash actions; ``tanh`` then rescale to ``[low, high]``."""

    def __init__(self, in_dim: int, low: np.ndarray, high: np.ndarray, hidden, activation: str) -> None:
        super().__init__()
        act_dim = int(low.shape[0])
        self.net = mlp(in_dim, hidden, 2 * act_dim, activation, out_gain=0.01)
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, x: torch.Tensor, deterministic: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
        """Returns (action in the Box, log-probability summed over action dims)."""
        mean, log_std = self._mean_log_std(x)
        std = log_std.exp()
        u = mean if deterministic else mean + std * torch.randn_like(mean)
        y = torch.tanh(u)
        return y * self.scale + self.bias, self._log_density(u, y, mean, log_std, std)

    def sample_n(self, x: torch.Tensor, n: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """``n`` sampled actions per row of ``x`` and their log-probabilities, ``[B * n, ...]`` with each row's
        ``n`` together (``x.repeat_interleave(n, 0)``'s order), from one forward of the network on ``x``."""
        mean, log_std = (t.repeat_interleave(n, 0) for t in self._mean_log_std(x))
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        y = torch.tanh(u)
        return y * self.scale + self.bias, self._log_density(u, y, mean, log_std, std)

    def log_prob(self, x: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """The log-density of ``action`` (in the Box, clamped just inside it) at features ``x``, summed over
        action dims (CQL's behaviour-cloning start maximises it for the dataset's actions)."""
        mean, log_std = self._mean_log_std(x)
        y = ((action - self.bias) / self.scale).clamp(-1 + 1e-6, 1 - 1e-6)
        return self._log_density(torch.atanh(y), y, mean, log_std, log_std.exp())

    def _mean_log_std(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = self.net(x).chunk(2, dim=-1)
        return mean, LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(log_std) + 1)

    def _log_density(
        self, u: torch.Tensor, y: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor, std: torch.Tensor
    ) -> torch.Tensor:
        """The Gaussian's log-density at the pre-squash ``u`` plus the tanh-and-rescale correction at ``y``."""
        return (
            -0.5 * ((u - mean) / std) ** 2
            - log_std
            - 0.5 * math.log(2 * math.pi)
            - torch.log(self.scale * (1 - y**2) + 1e-6)
        ).sum(-1)


class LogAlpha(nn.Module):
    """The learnable log entropy temperature."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.value = nn.Parameter(torch.tensor(math.log(alpha), dtype=torch.float32))


@POLICIES.register("sac")
class SACPolicy(BasePolicy):
    """Soft Actor-Critic (twin Q, target networks, automatic entropy tuning).

    ``update_dataset`` takes a TensorDict with ``obs``, ``action``, ``reward``,
    ``next_obs``, ``terminated``; each ``train()`` does one gradient update on it.
    """

    config_cls = SACConfig
    """The config class of ``policy.type: sac``."""

    supported_action_spaces = ("continuous",)
    """Action space kinds this policy can act in (checked before any worker starts)."""

    sync_module_names = ("encoder", "actor")
    learns_from_transitions = True
    REQUIRED_KEYS = REPLAY_KEYS
    minibatch_train = True

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build the actor (all workers) and the critics and temperature (train workers).

        Raises:
            ValueError: a non-Box action space, or a Box with infinite bounds.
        """
        self.env_meta = check_env_meta(env_meta, "sac")
        cfg, space = self.config, env_meta.action_space
        action_kind(space, "sac", ("continuous",))
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError(f"policy 'sac' needs finite action bounds to squash into, got {space!r}")
        self.encoder = self.register_module(
            "encoder",
            build_encoder(env_meta.observation_space, cnn=cfg.cnn, normalize=cfg.norm_obs, policy_name="sac"),
        )
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        self.actor = self.register_module("actor", self._build_actor(low, high))
        self._sde_matrices: Optional[torch.Tensor] = None
        self._sde_version, self._sde_steps = -1, 0
        self.act_dim = int(low.shape[0])
        self.target_entropy = float(cfg.target_entropy) if cfg.target_entropy is not None else -float(self.act_dim)
        if self.role_type is not PolicyRole.TRAIN:
            return
        build_twin_critics(self, self.encoder.dim, self.act_dim)
        self.log_alpha = self.register_module("log_alpha", LogAlpha(cfg.alpha))

    def _build_actor(self, low: np.ndarray, high: np.ndarray) -> nn.Module:
        cfg = self.config
        if not cfg.use_sde:
            return SquashedGaussianActor(self.encoder.dim, low, high, cfg.hidden_sizes, cfg.activation)
        latent_dim = cfg.hidden_sizes[-1] if cfg.hidden_sizes else self.encoder.dim
        noise = StateDependentNoise(
            latent_dim,
            int(low.shape[0]),
            log_std_init=cfg.log_std_init,
            full_std=cfg.full_std,
            use_expln=cfg.use_expln,
            learn_features=cfg.sde_learn_features,
        )
        return GSDEActor(
            self.encoder.dim, low, high, cfg.hidden_sizes, cfg.activation, noise, clip_mean=cfg.sde_mean_bound
        )

    def exploration_matrices(self, n: int) -> torch.Tensor:
        """gSDE's acting exploration matrices ``[n, latent, act]`` (one per acting row), by the sampling rule.

        New ones are drawn when there are none yet, when the number of rows changes, when new weights arrived
        (``weight_version`` moved: a new collection phase) and, with ``sde_sample_freq > 0``, after that
        many acting steps; otherwise the same matrices serve (the noise is a function of the state).
        """
        freq = self.config.sde_sample_freq
        w = self._sde_matrices
        if (
            w is None
            or w.shape[0] != n
            or self._sde_version != self.weight_version
            or (freq > 0 and self._sde_steps >= freq)
        ):
            with torch.no_grad():
                w = self._sde_matrices = self.actor.noise.sample_matrices(n)
            self._sde_version, self._sde_steps = self.weight_version, 0
        self._sde_steps += 1
        return w

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """Actor, critic (``q_lr``) and temperature optimizers (fused Adam/AdamW with ``fused_optimizer``)."""
        q_lr, fused = self.config.q_lr or optim_cfg.lr, self.config.fused_optimizer
        # The parameter lists every update steps, read once (walking the modules per update costs more than
        # a small network's optimizer step).
        self._actor_params = list(self.actor.parameters())
        self._critic_params = critic_parameters(self.modules, self.encoder)
        self._polyak = polyak_pairs(self.modules, ("qf",))
        self.register_optimizer("actor", build_optimizer(optim_cfg, self._actor_params, fused=fused))
        self.register_optimizer("critic", build_optimizer(optim_cfg, self._critic_params, lr=q_lr, fused=fused))
        if self.config.autotune_alpha:
            alpha_params = [self.log_alpha.value]
            self.register_optimizer("alpha", build_optimizer(optim_cfg, alpha_params, lr=q_lr, fused=fused))

    def upgrade_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """A checkpoint written with separate critics (``qf1``, ``qf2``) in the batched layout (``qf``)."""
        return upgrade_twin_critic_checkpoint(state, "sac")

    @torch.no_grad()
    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """Squashed Gaussian sample (or its mean) in the action Box (gSDE: see `exploration_matrices`)."""
        x = self.encoder(obs_to_tensor(obs, self.device))
        if self.config.use_sde and not deterministic:
            action, _ = self.actor(x, exploration_matrix=self.exploration_matrices(x.shape[0]))
        else:
            action, _ = self.actor(x, deterministic)
        return {"action": action.float().cpu().numpy()}

    def update_dataset(self, data: Any) -> None:
        """Take a sampled batch for the next ``train()`` (see `twin_critic.replay_dataset`).

        Raises:
            TypeError: ``data`` is not a TensorDict.
            KeyError: required keys are missing (listed with the keys present).
        """
        self.dataset = replay_dataset(self, data, "sac")

    @property
    def alpha(self) -> float:
        """Current entropy temperature."""
        return float(self.log_alpha.value.detach().exp())

    def critic_loss(
        self, ds: Dict[str, torch.Tensor], alpha: float
    ) -> Tuple[torch.Tensor, torch.Tensor, Dict[str, torch.Tensor]]:
        """The critics' loss on the batch ``ds``: the hook a variant overrides (CQL adds its conservative term);
        `train` steps the critics on it, then runs the actor, temperature and target updates.

        Args:
            ds: The batch (`update_dataset`).
            alpha: The entropy temperature, read once for this update.

        Returns:
            (loss, the batch's observation features for the actor update, metrics as 0-d tensors: q_loss,
            q_value and any the variant adds).
        """
        cfg, modules = self.config, self._modules
        with torch.no_grad():
            next_x = self.encoder(ds["next_obs"])
            next_action, next_logp = self.actor(next_x)
            next_q = min_target_q(modules, next_x, next_action)
            target = ds["reward"] + (1.0 - ds["terminated"]) * cfg.gamma * (next_q - alpha * next_logp)
        x = self.encoder(ds["obs"])  # a trainable encoder (a CNN) learns from the critic loss only
        q_loss, q1 = twin_critic_loss(modules, x, ds["action"], target)
        return q_loss, x, {"q_loss": q_loss.detach(), "q_value": q1.detach().mean()}

    def train(self) -> Dict[str, float]:
        """One critic update (`critic_loss`), delayed actor and temperature updates, target Polyak averaging.

        Returns:
            The `critic_loss` metrics (q_loss, q_value), actor_loss, alpha, alpha_loss.
        """
        name = self.config.type
        if self.dataset is None:
            raise RuntimeError(f"{name}.train() called before update_dataset(data)")
        if "critic" not in self._optimizers:
            raise RuntimeError(f"{name}.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds = self.config, self.dataset
        alpha = self.alpha
        loss, x, critic_metrics = self.critic_loss(ds, alpha)
        self.apply_gradients(
            loss, self._optimizers["critic"], self._critic_params, cfg.optim.max_grad_norm, return_norm=False
        )
        self.update_count += 1
        metrics = {k: v.item() for k, v in critic_metrics.items()}
        if self.update_count % cfg.policy_frequency == 0:
            for _ in range(cfg.policy_frequency):
                metrics.update(self._actor_update(x.detach()))
        else:
            metrics.update({k: self._last_metrics.get(k, 0.0) for k in ("actor_loss", "alpha_loss")})
        polyak_update(self._polyak, cfg.tau)
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        self.train_calls += 1
        metrics["alpha"] = self.alpha if cfg.autotune_alpha else alpha  # fixed: the value read above
        self._last_metrics = metrics
        return metrics

    def _actor_update(self, x: torch.Tensor) -> Dict[str, float]:
        cfg = self.config
        action, logp = self.actor(x)
        # The critics' weights detached: the actor's gradient flows through them to the action, and the
        # weight gradients the critics would get (never used: the critic step clears them) are not computed.
        q = self._modules["qf"](x, action, detach_params=True).amin(0)
        actor_loss = (self.alpha * logp - q).mean()
        self.apply_gradients(
            actor_loss, self._optimizers["actor"], self._actor_params, cfg.optim.max_grad_norm, return_norm=False
        )
        alpha_loss = 0.0
        if cfg.autotune_alpha:
            log_alpha = self.log_alpha.value
            loss = -(log_alpha.exp() * (logp.detach() + self.target_entropy)).mean()
            self.apply_gradients(loss, self._optimizers["alpha"], [log_alpha], return_norm=False)
            alpha_loss = loss.item()
        return {"actor_loss": actor_loss.item(), "alpha_loss": alpha_loss}
