"""TD3: twin delayed deep deterministic policy gradient for continuous (Box) actions.

A deterministic actor (tanh, rescaled to the Box bounds) and twin Q networks with
Polyak-averaged targets (Fujimoto et al., 2018), over an encoder chosen from the
observation space (`build_encoder`; a trainable one learns from the critic loss):

- the critic target takes the smaller of the two target critics;
- target policy smoothing: the target action gets clipped Gaussian noise;
- delayed updates: the actor and the targets move every ``policy_delay`` critic updates.

Acting adds Gaussian exploration noise (``exploration_noise`` x the half-range of the Box);
for the first ``uniform_steps`` env steps actions are uniform over the Box (SB3 before
``learning_starts``). The env-step count reaches acting workers with the weights.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch
from pydantic import Field
from torch import nn

from rlightning.policy.algorithms.networks import Progress, action_kind, mlp
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
from rlightning.policy.networks import batch_len, build_encoder, obs_to_tensor
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES


class TD3Config(PolicyConfig):
    """TD3's hyperparameters (``policy.type: td3``) on top of the shared `PolicyConfig`."""

    tau: float = Field(0.005, gt=0, le=1)
    """Target network Polyak rate."""
    q_lr: Optional[float] = Field(None, gt=0)
    """Critic learning rate (None: ``optim.lr``)."""
    policy_delay: int = Field(2, ge=1)
    """Actor and target updates every this many critic updates."""
    target_policy_noise: float = Field(0.2, ge=0)
    """Std of the target smoothing noise, as a fraction of the action half-range."""
    target_noise_clip: float = Field(0.5, ge=0)
    """Clip of the target smoothing noise, as a fraction of the action half-range."""
    exploration_noise: float = Field(0.1, ge=0)
    """Std of the acting noise, as a fraction of the action half-range."""
    uniform_steps: int = Field(0, ge=0)
    """Env steps at the start acting uniformly over the Box."""
    fused_optimizer: bool = True
    """Adam/AdamW through torch's fused kernel (one kernel per step instead of a loop of small ops per
    parameter tensor, which torch's default runs on CPU): the same update up to float rounding, so a seeded
    run differs in its last bits from one without it. False: torch's default implementation. Other
    optimizers are unaffected."""


class DeterministicActor(nn.Module):
    """``tanh`` MLP rescaled to ``[low, high]``."""

    def __init__(self, in_dim: int, low: np.ndarray, high: np.ndarray, hidden, activation: str) -> None:
        super().__init__()
        self.net = mlp(in_dim, hidden, int(low.shape[0]), activation, out_gain=0.01)
        self.register_buffer("scale", torch.as_tensor((high - low) / 2.0, dtype=torch.float32))
        self.register_buffer("bias", torch.as_tensor((high + low) / 2.0, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.net(x)) * self.scale + self.bias


@POLICIES.register("td3")
class TD3Policy(BasePolicy):
    """Twin Delayed DDPG.

    ``update_dataset`` takes a TensorDict with ``obs``, ``action``, ``reward``, ``next_obs``,
    ``terminated``; each ``train()`` does one critic update (and, every ``policy_delay``, an actor
    update and the target averaging).
    """

    config_cls = TD3Config
    """The config class of ``policy.type: td3``."""

    supported_action_spaces = ("continuous",)
    """Action space kinds this policy can act in (checked before any worker starts)."""

    sync_module_names = ("encoder", "actor", "progress")
    learns_from_transitions = True
    REQUIRED_KEYS = REPLAY_KEYS
    minibatch_train = True

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build the actor (all workers), the critics and the targets (train workers).

        Raises:
            ValueError: a non-Box action space, or a Box with infinite bounds.
        """
        self.env_meta = check_env_meta(env_meta, "td3")
        cfg, space = self.config, env_meta.action_space
        action_kind(space, "td3", ("continuous",))
        if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
            raise ValueError(f"policy 'td3' needs finite action bounds, got {space!r}")
        self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
        self.act_dim = int(self.low.shape[0])
        self.encoder = self.register_module(
            "encoder",
            build_encoder(env_meta.observation_space, cnn=cfg.cnn, normalize=cfg.norm_obs, policy_name="td3"),
        )
        make_actor = lambda: DeterministicActor(  # noqa: E731
            self.encoder.dim, self.low, self.high, cfg.hidden_sizes, cfg.activation
        )
        self.actor = self.register_module("actor", make_actor())
        self.progress = self.register_module("progress", Progress())
        if self.env_steps is not None:
            self.progress.env_steps.fill_(float(self.env_steps))
        if not hasattr(self, "np_rng"):
            self.np_rng = np.random.default_rng()
        if self.role_type is not PolicyRole.TRAIN:
            return
        self.register_module("actor_target", make_actor()).load_state_dict(self.actor.state_dict())
        self.modules["actor_target"].requires_grad_(False)
        build_twin_critics(self, self.encoder.dim, self.act_dim)

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """Actor and critic optimizers (``q_lr`` for the critics; fused Adam/AdamW with ``fused_optimizer``)."""
        fused = self.config.fused_optimizer
        # The parameter lists every update steps, read once (walking the modules per update is not free).
        self._actor_params = list(self.actor.parameters())
        self._critic_params = critic_parameters(self.modules, self.encoder)
        self._polyak = polyak_pairs(self.modules, ("actor", "qf"))
        self.register_optimizer("actor", build_optimizer(optim_cfg, self._actor_params, fused=fused))
        lr = self.config.q_lr
        self.register_optimizer("critic", build_optimizer(optim_cfg, self._critic_params, lr=lr, fused=fused))

    def upgrade_checkpoint_state(self, state: Dict[str, Any]) -> Dict[str, Any]:
        """A checkpoint written with separate critics (``qf1``, ``qf2``) in the batched layout (``qf``)."""
        return upgrade_twin_critic_checkpoint(state, "td3")

    def set_env_steps(self, env_steps: int) -> None:
        """Record the run's env steps; acting workers receive them with the next weight sync."""
        super().set_env_steps(env_steps)
        progress = self._modules.get("progress")
        if progress is not None:
            progress.env_steps.fill_(float(self.env_steps))

    @property
    def schedule_steps(self) -> int:
        """Env steps the acting schedule runs on: the synced count, or this worker's answered rows when larger."""
        return max(int(self.progress.env_steps), self._rollout_rows)

    @torch.no_grad()
    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """The actor's action, with Gaussian exploration noise (uniform in the first ``uniform_steps``)."""
        n = batch_len(obs)
        if not deterministic and self.schedule_steps < self.config.uniform_steps:
            return {"action": self.np_rng.uniform(self.low, self.high, (n, self.act_dim)).astype(np.float32)}
        action = self.actor(self.encoder(obs_to_tensor(obs, self.device))).float().cpu().numpy()
        if not deterministic and self.config.exploration_noise > 0:
            half = (self.high - self.low) / 2.0
            action = action + self.np_rng.normal(0.0, 1.0, action.shape) * self.config.exploration_noise * half
        return {"action": np.clip(action, self.low, self.high).astype(np.float32)}

    def update_dataset(self, data: Any) -> None:
        """Take a sampled batch for the next ``train()`` (see `twin_critic.replay_dataset`).

        Raises:
            TypeError: ``data`` is not a TensorDict.
            KeyError: required keys are missing (listed with the keys present).
        """
        self.dataset = replay_dataset(self, data, "td3")

    def critic_target(self, reward: torch.Tensor, terminated: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
        """``r + gamma (1 - term) min_i Q_i'(s', clip(pi'(s') + clip(noise)))``."""
        cfg = self.config
        with torch.no_grad():
            next_x = self.encoder(next_obs)
            next_action = self._modules["actor_target"](next_x)
            scale = self.actor.scale
            if cfg.target_policy_noise > 0:
                noise = torch.randn_like(next_action) * cfg.target_policy_noise * scale
                noise = torch.maximum(
                    torch.minimum(noise, cfg.target_noise_clip * scale), -cfg.target_noise_clip * scale
                )
                next_action = next_action + noise
            low, high = self.actor.bias - scale, self.actor.bias + scale
            next_action = torch.maximum(torch.minimum(next_action, high), low)
            next_q = min_target_q(self._modules, next_x, next_action)
            return reward + cfg.gamma * (1.0 - terminated) * next_q

    def critic_loss(self, ds: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """MSE of both critics against `critic_target`: ``loss``, ``q1``."""
        target = self.critic_target(ds["reward"], ds["terminated"], ds["next_obs"])
        loss, q1 = twin_critic_loss(self._modules, self.encoder(ds["obs"]), ds["action"], target)
        return {"loss": loss, "q1": q1}

    def actor_loss(self, obs: torch.Tensor) -> torch.Tensor:
        """``-mean Q_1(s, pi(s))``."""
        x = self.encoder(obs).detach()  # the encoder learns from the critic loss only
        # The first critic only, its weights detached: the gradient reaches the action, not the critic's
        # weights (whose gradients the critic step would clear unused).
        q1 = self._modules["qf"](x, self.actor(x), detach_params=True, critics=slice(0, 1))
        return -q1.mean()

    def _soft_update(self) -> None:
        polyak_update(self._polyak, self.config.tau)

    def train(self) -> Dict[str, float]:
        """One critic update; every ``policy_delay`` updates also the actor and the targets.

        Returns:
            q_loss, q_value, actor_loss (the last actor update's).
        """
        if self.dataset is None:
            raise RuntimeError("td3.train() called before update_dataset(data)")
        if "critic" not in self._optimizers:
            raise RuntimeError("td3.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds = self.config, self.dataset
        out = self.critic_loss(ds)
        self.apply_gradients(
            out["loss"], self._optimizers["critic"], self._critic_params, cfg.optim.max_grad_norm, return_norm=False
        )
        self.update_count += 1
        metrics = {"q_loss": out["loss"].item(), "q_value": out["q1"].detach().mean().item()}
        if self.update_count % cfg.policy_delay == 0:
            loss = self.actor_loss(ds["obs"])
            self.apply_gradients(
                loss, self._optimizers["actor"], self._actor_params, cfg.optim.max_grad_norm, return_norm=False
            )
            self._soft_update()
            metrics["actor_loss"] = loss.item()
        else:
            metrics["actor_loss"] = self._last_metrics.get("actor_loss", 0.0)
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        self.train_calls += 1
        self._last_metrics = metrics
        return metrics
