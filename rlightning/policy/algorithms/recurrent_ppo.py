"""Recurrent PPO (``policy.recurrent: lstm | gru``): PPO's acting and training over sequences.

The network is encoder -> recurrent core -> actor and critic heads. Acting carries the core's state per env
worker (`RecurrentStreams`), sets it to zero at episode starts, and writes the state *before* each step
(``recurrent_h``, ``recurrent_c`` for an LSTM) and ``is_init`` into the record. Training takes sequences:
the buffer's episode unit (``buffer.unit: episode``) hands over ``[E, L]`` pieces of episodes (the on-policy
engine closes every piece at the end of the rollout, bootstrapped by the value of its next observation),
padded to the longest with ``mask``. Each minibatch is a set of whole sequences re-run from the state
stored at their first step, with the state reset wherever ``is_init`` is set, and every loss averaged
over the unpadded steps only (as CleanRL's ``ppo_atari_lstm`` and sb3-contrib's ``RecurrentPPO`` do, on
episode pieces instead of fixed env-dimension chunks).
"""

from __future__ import annotations

from typing import Any, Dict

import torch

from rlightning.policy.networks.masks import action_mask

__all__ = ["SEQUENCE_KEYS", "sequence_dataset", "sequence_losses"]

#: Keys a recurrent PPO dataset needs besides the action and the state keys.
SEQUENCE_KEYS = ("obs", "log_prob", "value", "advantage", "return", "mask", "is_init")


def sequence_dataset(policy: Any, data: Any, act_key: str) -> Dict[str, torch.Tensor]:
    """The tensors of a ``[E, L]`` sequence batch that recurrent PPO trains on (on the policy's device).

    Raises:
        ValueError: ``data`` is not ``[E, L]`` with a ``mask`` (a flat transition batch), or holds fewer
            sequences than ``num_minibatches``.
        KeyError: a required key is missing (listed with the keys present).
    """
    keys = set(data.keys())
    core = policy.core
    if len(data.batch_size) != 2 or "mask" not in keys:
        raise ValueError(
            f"ppo with recurrent={policy.config.recurrent!r} trains on sequences: it needs an [episodes, steps] "
            f"batch with 'mask' (buffer.unit: episode), got batch size {tuple(data.batch_size)} with keys "
            f"{sorted(keys)}; set buffer.unit to 'episode'"
        )
    required = (*SEQUENCE_KEYS, act_key, *core.state_keys)
    missing = [k for k in required if k not in keys]
    if missing:
        raise KeyError(
            f"ppo.update_dataset (recurrent): missing keys {missing}; got {sorted(keys)} (the state keys and "
            "is_init come from the recurrent policy's acting, advantage and return from the GAE postprocess)"
        )
    e, length = int(data.batch_size[0]), int(data.batch_size[1])
    minibatches = policy.config.num_minibatches
    if e < minibatches:
        raise ValueError(f"ppo.update_dataset got {e} sequences, fewer than num_minibatches={minibatches}")
    dev = policy.device
    ds = {k: data.get(k).to(dev) for k in (*SEQUENCE_KEYS, *core.state_keys)}
    for k in ("log_prob", "value", "advantage", "return"):
        ds[k] = ds[k].reshape(e, length).float()
    ds["mask"] = ds["mask"].reshape(e, length).bool()
    ds["is_init"] = ds["is_init"].reshape(e, length).bool()
    for k in core.state_keys:  # the state before each sequence's first step
        ds[k] = ds[k][:, 0].reshape(e, -1).float()
    action = data.get(act_key).to(dev)
    if policy.kind == "discrete":
        ds["action"] = action.reshape(e, length).long() - policy.action_start
    else:
        ds["action"] = action.reshape(e, length, -1).float()
    return ds


def _masked_mean(x: torch.Tensor, mask: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    return (x * mask).sum() / count


def sequence_losses(policy: Any, ds: Dict[str, torch.Tensor], idx: torch.Tensor) -> Dict[str, torch.Tensor]:
    """PPO's clipped losses on the sequences ``idx`` of ``ds``, re-run through the core; masked means.

    Returns:
        ``loss`` (to minimise) and the detached ``policy_loss``, ``value_loss``, ``entropy``, ``approx_kl``,
        ``clipfrac``.
    """
    cfg, clip = policy.config, policy.clip_range
    obs = ds["obs"][idx]
    b, length = obs.shape[0], obs.shape[1]
    flat_obs = obs.reshape((b * length,) + tuple(obs.shape[2:]))
    feats = policy.encoder(flat_obs).reshape(b, length, -1)
    state0 = {k: ds[k][idx] for k in policy.core.state_keys}
    y = policy.core.unroll(feats, state0, ds["is_init"][idx])
    y_pi, y_vf = y if isinstance(y, tuple) else (y, y)
    y_pi, y_vf = y_pi.reshape(b * length, -1), y_vf.reshape(b * length, -1)
    mask = ds["mask"][idx].reshape(-1).float()
    count = mask.sum().clamp_min(1.0)
    act = ds["action"][idx]
    act = act.reshape(b * length) if policy.kind == "discrete" else act.reshape(b * length, -1)
    new_logp, entropy = policy.log_prob_entropy(y_pi, act, action_mask(flat_obs))
    new_value = policy.critic(y_vf).squeeze(-1)
    logratio = new_logp - ds["log_prob"][idx].reshape(-1)
    ratio = logratio.exp()
    with torch.no_grad():
        approx_kl = _masked_mean((ratio - 1) - logratio, mask, count)
        clipfrac = _masked_mean(((ratio - 1.0).abs() > clip).float(), mask, count)
    adv = ds["advantage"][idx].reshape(-1)
    if cfg.norm_adv and count > 1:
        mean = _masked_mean(adv, mask, count)
        var = _masked_mean((adv - mean) ** 2, mask, count) * count / (count - 1)
        adv = (adv - mean) / (var.sqrt() + 1e-8)
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip))
    pg_loss = _masked_mean(pg, mask, count)
    ret, old_value = ds["return"][idx].reshape(-1), ds["value"][idx].reshape(-1)
    if cfg.clip_vloss:
        vclip = policy.value_clip(clip)
        clipped = old_value + (new_value - old_value).clamp(-vclip, vclip)
        v_loss = 0.5 * _masked_mean(torch.max((new_value - ret) ** 2, (clipped - ret) ** 2), mask, count)
    else:
        v_loss = 0.5 * _masked_mean((new_value - ret) ** 2, mask, count)
    ent = _masked_mean(entropy, mask, count)
    loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
    return {
        "loss": loss,
        "policy_loss": pg_loss.detach(),
        "value_loss": v_loss.detach(),
        "entropy": ent.detach(),
        "approx_kl": approx_kl,
        "clipfrac": clipfrac,
    }
