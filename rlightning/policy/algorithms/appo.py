"""IMPALA and APPO: actor-critic learners that correct for acting on stale weights with V-trace.

Env workers act with the weights of their last sync, which on the ``asyncrl``
engine are several learner updates old; every action's log-probability under
the acting policy (``log_prob``) and the weight version that computed it
(``policy_version``) travel in the record as the policy's extras. The learner
recomputes values and log-probabilities under its current weights and
corrects with V-trace (`rlightning.policy.returns.vtrace`, Espeholt et al.
2018) over each stored sequence:

- **IMPALA** (``policy.type: impala``): the V-trace policy gradient
  ``-mean(rho_s * (r_s + gamma v_{s+1} - V(x_s)) * log pi(a_s|x_s))`` plus
  ``vf_coef * 0.5 * mean((v_s - V(x_s))^2)`` minus the entropy bonus, one
  gradient step per minibatch.
- **APPO** (``policy.type: appo``): PPO's clipped surrogate on the V-trace
  advantages, with the ratio ``pi_theta / pi_old`` against the learner's
  policy at the start of the update (the "target network" of RLlib's APPO,
  refreshed every ``train()``), over ``update_epochs`` x ``num_minibatches``.

The networks and the acting are PPO's (`PPOPolicy`). Batches are sequences:
the buffer stores whole episode pieces (``buffer.unit: episode``; on-policy
engines cut every episode at each rollout's end), sampled as ``[E, L]`` with a
``mask``. Each batch's policy lag (the learner's weight version minus the
version that acted, per row) is reported as ``batch_policy_lag`` (mean) and
``batch_policy_lag_max``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np
import torch
from pydantic import Field

from rlightning.policy.algorithms.ppo import PPOPolicy, _explained_variance
from rlightning.policy.networks import nest_dotted_keys
from rlightning.policy.networks.masks import action_mask
from rlightning.policy.returns import vtrace
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES

__all__ = [
    "APPOConfig",
    "APPOPolicy",
    "IMPALAConfig",
    "IMPALAPolicy",
    "POLICY_VERSION",
    "appo_policy_loss",
    "impala_policy_loss",
]

#: The extra each action carries: the weight version of the policy that computed it.
POLICY_VERSION = "policy_version"


class _VTraceConfig(PolicyConfig):
    """Settings IMPALA and APPO share (V-trace clips, loss weights, minibatching)."""

    vtrace_rho_bar: float = Field(1.0, gt=0)
    """V-trace: clip of the importance weights rho in the TD errors and policy-gradient advantages."""
    vtrace_c_bar: float = Field(1.0, gt=0)
    """V-trace: clip of the trace coefficients c."""
    vtrace_lambda: float = Field(1.0, ge=0, le=1)
    """V-trace: extra decay of the traces (1: the paper's V-trace)."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus coefficient."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss coefficient (the loss is ``0.5 * (v_s - V(x_s))^2``)."""
    update_epochs: int = Field(1, ge=1)
    """Passes over each batch."""
    num_minibatches: int = Field(1, ge=1)
    """Minibatches per pass."""
    norm_adv: bool = False
    """Normalise the V-trace advantages per minibatch."""


class IMPALAConfig(_VTraceConfig):
    """IMPALA's hyperparameters (``policy.type: impala``) on top of the shared `PolicyConfig`."""


class APPOConfig(_VTraceConfig):
    """APPO's hyperparameters (``policy.type: appo``) on top of the shared `PolicyConfig`."""

    clip_coef: float = Field(0.2, gt=0)
    """Clipping range of the ratio ``pi_theta / pi_old``."""
    update_epochs: int = Field(2, ge=1)
    """Passes over each batch."""
    num_minibatches: int = Field(2, ge=1)
    """Minibatches per pass."""
    norm_adv: bool = True
    """Normalise the V-trace advantages per minibatch."""


# ---------------------------------------------------------------------- the losses (pure functions)


def impala_policy_loss(log_prob: torch.Tensor, advantage: torch.Tensor) -> torch.Tensor:
    """IMPALA's policy-gradient loss ``-mean(advantage * log pi(a|x))`` (advantages are constants)."""
    return -(advantage.detach() * log_prob).mean()


def appo_policy_loss(
    log_prob: torch.Tensor, old_log_prob: torch.Tensor, advantage: torch.Tensor, clip_coef: float
) -> torch.Tensor:
    """APPO's clipped surrogate ``-mean(min(A r, A clip(r, 1 - eps, 1 + eps)))``, ``r = pi / pi_old``."""
    ratio = (log_prob - old_log_prob.detach()).exp()
    adv = advantage.detach()
    return -torch.min(adv * ratio, adv * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef)).mean()


def _get(data: Any, keys: set, *names: Any) -> Optional[torch.Tensor]:
    for name in names:
        if name in keys:
            return data.get(name)
    return None


@POLICIES.register("impala", config=IMPALAConfig)
class IMPALAPolicy(PPOPolicy):
    """IMPALA: V-trace actor-critic (Espeholt et al., 2018) with PPO's networks and acting.

    ``update_dataset`` takes sequences ``[E, L]`` (a ``mask`` marks the steps; ``buffer.unit: episode``)
    with ``obs``, ``action`` (or ``raw_action``), ``log_prob`` (the acting policy's), ``reward``,
    ``next_obs``, ``terminated`` and ``done``; ``train`` computes V-trace targets under the current
    weights and takes ``update_epochs`` x ``num_minibatches`` gradient steps.
    """

    config_cls = IMPALAConfig
    """The config class of ``policy.type: impala``."""

    #: The asyncrl engine may train it from a rollout buffer filled by actors on stale weights.
    corrects_policy_lag = True

    algo_name = "impala"

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg: PolicyConfig) -> Optional[Callable]:
        """None: V-trace is computed by the learner, with its current weights, not by the buffer."""
        return None

    def compute_actions(
        self, obs: np.ndarray, deterministic: bool = False, with_value: bool = False
    ) -> Dict[str, np.ndarray]:
        """PPO's actions and ``log_prob``, plus ``policy_version`` (this policy's weight version).

        No ``value`` unless asked (``with_value``): V-trace values the observations with the learner's
        current weights (`vtrace_targets`), so a critic pass per acting step would be thrown away.
        """
        out = super().compute_actions(obs, deterministic=deterministic, with_value=with_value)
        out[POLICY_VERSION] = np.full(np.shape(out["action"])[:1], int(self.weight_version), dtype=np.int64)
        return out

    # ------------------------------------------------------------------ data

    def update_dataset(self, data: Any) -> None:
        """Take a batch of sequences ``[E, L]`` (with ``mask``) for the next ``train()``.

        Raises:
            TypeError: ``data`` is not a TensorDict.
            ValueError: ``data`` is not ``[E, L]`` sequences (the buffer needs ``unit: episode``).
            KeyError: required keys are missing (listed with the keys present).
        """
        from tensordict import TensorDictBase

        name = self.algo_name
        if not isinstance(data, TensorDictBase):
            raise TypeError(f"{name}.update_dataset needs a TensorDict, got {type(data).__name__}")
        if self.env_meta is None:
            raise RuntimeError(f"{name}.update_dataset called before construct_network(env_meta)")
        data = nest_dotted_keys(data)  # dict observations sampled as "obs.<key>" columns
        if len(data.batch_size) != 2:
            raise ValueError(
                f"{name}.update_dataset needs sequences [episodes, steps] for V-trace, got batch size "
                f"{tuple(data.batch_size)}; set buffer.unit='episode' (with sampler 'all')"
            )
        keys = set(data.keys(include_nested=True))
        act_key = "raw_action" if self.kind == "continuous" and "raw_action" in keys else "action"
        wanted = {
            "obs": ("obs",),
            "action": (act_key,),
            "log_prob": ("log_prob",),
            "reward": ("reward", ("next", "reward")),
            "next_obs": ("next_obs", ("next", "obs")),
            "terminated": ("terminated", ("next", "terminated")),
            "done": ("done", ("next", "done")),
        }
        ds: Dict[str, torch.Tensor] = {}
        missing = []
        for out_key, names in wanted.items():
            value = _get(data, keys, *names)
            if value is None:
                missing.append(names[0])
            else:
                ds[out_key] = value.to(self.device)
        if missing:
            shown = sorted(".".join(k) if isinstance(k, tuple) else k for k in keys)
            raise KeyError(f"{name}.update_dataset: missing keys {missing}; got {shown}")
        e, t = int(data.batch_size[0]), int(data.batch_size[1])
        mask = _get(data, keys, "mask")
        ds["mask"] = torch.ones(e, t, dtype=torch.bool) if mask is None else mask.to(self.device).reshape(e, t).bool()
        version = _get(data, keys, POLICY_VERSION)
        ds[POLICY_VERSION] = None if version is None else version.to(self.device).reshape(e, t).long()
        for k in ("log_prob", "reward"):
            ds[k] = ds[k].reshape(e, t).float()
        for k in ("terminated", "done"):
            ds[k] = ds[k].reshape(e, t).bool()
        action = ds["action"]
        if self.kind == "discrete":
            ds["action"] = action.reshape(e, t).long() - self.action_start
        else:
            ds["action"] = action.reshape(e, t, -1).float()
        self.dataset = ds

    # ------------------------------------------------------------------ learning

    def _flat_eval(self, obs: torch.Tensor, action: torch.Tensor):
        """log pi(a|x), entropy and V(x) of flat rows."""
        x = self.encoder(obs)
        logp, entropy = self.log_prob_entropy(x, action, action_mask(obs))
        return logp, entropy, self.critic(x).squeeze(-1)

    @torch.no_grad()
    def vtrace_targets(self, ds: Dict[str, torch.Tensor]) -> Dict[str, torch.Tensor]:
        """V-trace under the current weights: flat ``[n]`` rows of the valid steps.

        Returns:
            ``vs`` (value targets), ``pg_adv`` (``rho_s (r_s + gamma v_{s+1} - V(x_s))``), ``old_log_prob``
            (the current policy's), ``value``, ``log_rho`` and ``index`` (the rows' flat positions).
        """
        cfg = self.config
        mask = ds["mask"]
        e, t = mask.shape

        def rows(key: str) -> torch.Tensor:
            return ds[key].reshape(e * t, *ds[key].shape[2:])

        logp, _, value = self._flat_eval(rows("obs"), rows("action"))
        next_value = self.critic(self.encoder(rows("next_obs"))).squeeze(-1)
        logp, value, next_value = logp.reshape(e, t), value.reshape(e, t), next_value.reshape(e, t)
        log_rho = torch.where(mask, logp - ds["log_prob"], torch.zeros_like(logp))
        done = ds["done"] | ~mask  # padding after an episode's last step never flows back into it
        vs, pg_adv = vtrace(
            log_rho.cpu(),
            ds["reward"].cpu(),
            value.cpu(),
            next_value.cpu(),
            (ds["terminated"] & mask).cpu(),
            done.cpu(),
            gamma=cfg.gamma,
            rho_bar=cfg.vtrace_rho_bar,
            c_bar=cfg.vtrace_c_bar,
            lmbda=cfg.vtrace_lambda,
        )
        flat = mask.reshape(-1)
        return {
            "vs": vs.to(self.device).reshape(-1)[flat],
            "pg_adv": pg_adv.to(self.device).reshape(-1)[flat],
            "old_log_prob": logp.reshape(-1)[flat],
            "value": value.reshape(-1)[flat],
            "log_rho": log_rho.reshape(-1)[flat],
        }

    def policy_loss(self, log_prob: torch.Tensor, old_log_prob: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
        """IMPALA: the V-trace policy gradient (``old_log_prob`` unused)."""
        return impala_policy_loss(log_prob, adv)

    def train(self) -> Dict[str, float]:
        """V-trace targets under the current weights, then ``update_epochs`` x ``num_minibatches`` steps.

        Returns:
            policy_loss, value_loss, entropy, approx_kl (to the policy at the start), rho_mean,
            rho_clipfrac, explained_variance, lr, batch_policy_lag and batch_policy_lag_max
            (when the actions carry ``policy_version``).

        Raises:
            RuntimeError: no dataset or no optimizer yet.
        """
        name = self.algo_name
        if self.dataset is None:
            raise RuntimeError(f"{name}.train() called before update_dataset(data)")
        if "main" not in self._optimizers:
            raise RuntimeError(f"{name}.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds, opt = self.config, self.dataset, self._optimizers["main"]
        lr = self._current_lr()
        for group in opt.param_groups:
            group["lr"] = lr
        mask = ds["mask"].reshape(-1)
        obs = ds["obs"].reshape(-1, *ds["obs"].shape[2:])[mask]
        action = ds["action"].reshape(-1, *ds["action"].shape[2:])[mask]
        targets = self.vtrace_targets(ds)
        n = int(obs.shape[0])
        metrics: Dict[str, float] = {"lr": lr}
        if n == 0:
            self.train_calls += 1
            return metrics
        params = self.get_trainable_parameters()
        sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0}
        steps = 0
        minibatches = min(cfg.num_minibatches, n)
        for _ in range(cfg.update_epochs):
            for idx in torch.randperm(n, device=self.device).tensor_split(minibatches):
                logp, entropy, value = self._flat_eval(obs[idx], action[idx])
                adv = targets["pg_adv"][idx]
                if cfg.norm_adv and adv.numel() > 1:
                    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
                pg_loss = self.policy_loss(logp, targets["old_log_prob"][idx], adv)
                v_loss = 0.5 * ((value - targets["vs"][idx]) ** 2).mean()
                ent = entropy.mean()
                loss = pg_loss + cfg.vf_coef * v_loss - cfg.ent_coef * ent
                self.apply_gradients(loss, opt, params, cfg.optim.max_grad_norm)
                with torch.no_grad():
                    logratio = logp - targets["old_log_prob"][idx]
                    sums["approx_kl"] += float(((logratio.exp() - 1) - logratio).mean())
                sums["policy_loss"] += pg_loss.item()
                sums["value_loss"] += v_loss.item()
                sums["entropy"] += ent.item()
                steps += 1
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(obs)))
        self.update_count += steps
        self.train_calls += 1
        metrics.update({k: v / steps for k, v in sums.items()})
        rho = targets["log_rho"].exp()
        metrics["rho_mean"] = float(rho.mean())
        metrics["rho_clipfrac"] = float((rho > cfg.vtrace_rho_bar).float().mean())
        metrics["explained_variance"] = _explained_variance(targets["value"], targets["vs"])
        metrics.update(self._lag_metrics(ds))
        self._last_metrics = metrics
        return metrics

    def _lag_metrics(self, ds: Dict[str, torch.Tensor]) -> Dict[str, float]:
        version = ds.get(POLICY_VERSION)
        if version is None:
            return {}
        acted = version.reshape(-1)[ds["mask"].reshape(-1)]
        if acted.numel() == 0:
            return {}
        lag = int(self.weight_version) - acted
        return {"batch_policy_lag": float(lag.float().mean()), "batch_policy_lag_max": float(lag.max())}


@POLICIES.register("appo", config=APPOConfig)
class APPOPolicy(IMPALAPolicy):
    """APPO: PPO's clipped surrogate on V-trace advantages, V-trace targets for the value loss.

    Same data and acting as `IMPALAPolicy`; the ratio of the surrogate is taken against the learner's
    policy at the start of each ``train()`` (the V-trace advantages already correct from the acting
    policy to that one).
    """

    config_cls = APPOConfig
    """The config class of ``policy.type: appo``."""

    algo_name = "appo"

    def policy_loss(self, log_prob: torch.Tensor, old_log_prob: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
        """APPO: the clipped surrogate with ``clip_coef``."""
        return appo_policy_loss(log_prob, old_log_prob, adv, self.config.clip_coef)
