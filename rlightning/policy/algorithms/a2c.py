"""A2C: synchronous advantage actor-critic (one gradient step per rollout) for discrete and continuous actions.

The networks, acting and the buffer's GAE post-process are PPO's (`PPOPolicy`); the update is
A2C's: one step on the whole rollout with the loss

    -mean(advantage * log pi(a|s)) - ent_coef * mean(entropy) + vf_coef * mean((return - V(s))^2)

(``gae_lambda=1``: advantages are discounted returns minus the value, as in Stable-Baselines3's A2C).
"""

from __future__ import annotations

from typing import Dict

import torch
from pydantic import Field

from rlightning.policy.algorithms.ppo import PPOPolicy, _explained_variance
from rlightning.policy.networks.masks import action_mask
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES


class A2CConfig(PolicyConfig):
    """A2C's hyperparameters (``policy.type: a2c``) on top of the shared `PolicyConfig`."""

    gae_lambda: float = Field(1.0, ge=0, le=1)
    """GAE lambda (1: discounted returns minus the value)."""
    ent_coef: float = Field(0.0, ge=0)
    """Entropy bonus coefficient."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss coefficient."""
    norm_adv: bool = False
    """Normalise advantages over the rollout."""


@POLICIES.register("a2c")
class A2CPolicy(PPOPolicy):
    """Advantage actor-critic: PPO's networks and data, one unclipped policy-gradient step per ``train()``.

    ``update_dataset`` takes a TensorDict with ``obs``, ``action`` (or ``raw_action``), ``log_prob``,
    ``value``, ``advantage`` and ``return`` (the buffer's GAE post-process adds the last two).
    """

    config_cls = A2CConfig
    """The config class of ``policy.type: a2c``."""

    def loss(self, ds: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """A2C's loss terms on a batch: ``loss``, ``policy_loss``, ``value_loss``, ``entropy``."""
        cfg = self.config
        x = self.encoder(ds["obs"])
        logp, entropy = self.log_prob_entropy(x, ds["action"], action_mask(ds["obs"]))
        value = self.critic(x).squeeze(-1)
        adv = ds["advantage"]
        if cfg.norm_adv and adv.numel() > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss = -(adv * logp).mean()
        value_loss = ((ds["return"] - value) ** 2).mean()
        ent = entropy.mean()
        loss = policy_loss - cfg.ent_coef * ent + cfg.vf_coef * value_loss
        return {"loss": loss, "policy_loss": policy_loss, "value_loss": value_loss, "entropy": ent}

    def train(self) -> Dict[str, float]:
        """One gradient step on the whole rollout.

        Returns:
            policy_loss, value_loss, entropy, explained_variance, lr.

        Raises:
            RuntimeError: no dataset or no optimizer yet.
        """
        if self.dataset is None:
            raise RuntimeError("a2c.train() called before update_dataset(data)")
        if "main" not in self._optimizers:
            raise RuntimeError("a2c.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        opt = self._optimizers["main"]
        lr = self._current_lr()
        for group in opt.param_groups:
            group["lr"] = lr
        out = self.loss(self.dataset)
        self.apply_gradients(out["loss"], opt, self.get_trainable_parameters(), self.config.optim.max_grad_norm)
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(self.dataset["obs"])))
        self.update_count += 1
        self.train_calls += 1
        metrics = {k: float(out[k].detach()) for k in ("policy_loss", "value_loss", "entropy")}
        metrics["explained_variance"] = _explained_variance(self.dataset["value"], self.dataset["return"])
        metrics["lr"] = lr
        self._last_metrics = metrics
        return metrics
