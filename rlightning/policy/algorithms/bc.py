"""BC: behaviour cloning, supervised learning of the dataset's actions (offline).

Continuous (Box) actions: a deterministic actor (TD3's `DeterministicActor`: tanh rescaled to the Box)
regressed onto the dataset's actions with a mean squared error, as CORL's ``any_percent_bc`` (its
hyperparameters: two hidden layers of 256, Adam at 3e-4, batch 256). Discrete actions: a categorical policy
(logits from an `mlp`) trained with the cross-entropy of the dataset's actions; it acts greedily when
deterministic, by sampling otherwise.

``update_dataset`` takes a TensorDict with ``obs`` and ``action`` (any other keys are ignored); each
``train()`` is one gradient step on it. Trained by the ``offline`` engine from a dataset.
"""

from __future__ import annotations

from typing import Any, Dict

import numpy as np
import torch
from torch.nn import functional as F

from rlightning.policy.algorithms.networks import action_kind, categorical_draw, mlp, mlp_forward
from rlightning.policy.algorithms.td3 import DeterministicActor
from rlightning.policy.base_policy import BasePolicy
from rlightning.policy.networks import build_encoder, nest_dotted_keys, obs_to_tensor
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES

__all__ = ["BCConfig", "BCPolicy", "categorical_actions", "offline_batch"]


class BCConfig(PolicyConfig):
    """Behaviour cloning's settings (``policy.type: bc``) on top of the shared `PolicyConfig`.

    CORL's hyperparameters (the ``bc_*`` presets set them): ``hidden_sizes: [256, 256]``, ``activation: relu``,
    Adam at ``optim.lr: 3e-4`` without gradient clipping, batch 256.
    """

    fused_optimizer: bool = True
    """Adam/AdamW through torch's fused kernel (the same update up to float rounding)."""


def offline_batch(policy: Any, data: Any, name: str, keys: tuple) -> Dict[str, torch.Tensor]:
    """``keys`` of a sampled batch as flat tensors on the policy's device; ``action`` as the policy acts
    (float ``[n, act_dim]`` for a Box, int64 ``[n]`` from 0 for a Discrete); ``reward``, ``terminated`` float ``[n]``.

    Raises:
        TypeError: not a TensorDict.
        RuntimeError: no network yet.
        KeyError: a key missing (listed with those present).
        ValueError: an empty batch.
    """
    from tensordict import TensorDictBase

    if not isinstance(data, TensorDictBase):
        raise TypeError(f"{name}.update_dataset needs a TensorDict, got {type(data).__name__}")
    if policy.env_meta is None:
        raise RuntimeError(f"{name}.update_dataset called before construct_network(env_meta)")
    data = nest_dotted_keys(data)
    missing = [k for k in keys if k not in data.keys()]
    if missing:
        raise KeyError(f"{name}.update_dataset: missing keys {missing}; got {sorted(data.keys())}")
    flat = data.reshape(-1) if len(data.batch_size) > 1 else data
    n = int(flat.batch_size.numel())
    if n == 0:
        raise ValueError(f"{name}.update_dataset got an empty batch")
    ds = {k: flat.get(k).to(policy.device) for k in keys}
    if policy.discrete:
        ds["action"] = ds["action"].reshape(n).long() - policy.action_start
    else:
        ds["action"] = ds["action"].reshape(n, policy.act_dim).float()
    for k in ("reward", "terminated"):
        if k in ds:
            ds[k] = ds[k].reshape(n).float()
    return ds


@torch.no_grad()
def categorical_actions(policy: Any, obs: Any, deterministic: bool) -> Dict[str, np.ndarray]:
    """The acting of a policy whose ``actor`` is an `mlp` of logits over a Discrete space (BC, discrete IQL):
    the greedy action when deterministic, a draw from the softmax otherwise, offset by ``policy.action_start``."""
    logits = mlp_forward(policy.actor, policy.encoder(obs_to_tensor(obs, policy.device)))
    pick = logits.argmax(-1) if deterministic else categorical_draw(torch.log_softmax(logits, -1))
    return {"action": pick.cpu().numpy().astype(np.int64) + policy.action_start}


@POLICIES.register("bc")
class BCPolicy(BasePolicy):
    """Behaviour cloning for Box (MSE onto the actions) and Discrete (cross-entropy) action spaces."""

    config_cls = BCConfig
    """The config class of ``policy.type: bc``."""

    supported_action_spaces = ("continuous", "discrete")
    """Action space kinds this policy can act in (checked before any worker starts)."""

    sync_module_names = ("encoder", "actor")
    learns_from_transitions = True
    minibatch_train = True
    REQUIRED_KEYS = ("obs", "action")

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build the encoder and the actor (a deterministic Box actor, or a logits MLP).

        Raises:
            ValueError: an action space that is neither a 1-D Box nor a Discrete, or a Box with infinite bounds.
        """
        self.env_meta = check_env_meta(env_meta, "bc")
        cfg, space = self.config, env_meta.action_space
        kind = action_kind(space, "bc", ("continuous", "discrete"))
        self.discrete = kind == "discrete"
        self.encoder = self.register_module(
            "encoder",
            build_encoder(env_meta.observation_space, cnn=cfg.cnn, normalize=cfg.norm_obs, policy_name="bc"),
        )
        if self.discrete:
            self.n_actions, self.action_start = int(space.n), int(space.start)
            self.act_dim = 1
            self.actor = self.register_module(
                "actor", mlp(self.encoder.dim, cfg.hidden_sizes, self.n_actions, cfg.activation, out_gain=0.01)
            )
            self.acting_family = "actor_critic"  # logits: greedy when deterministic (ActingNet)
        else:
            if not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
                raise ValueError(f"policy 'bc' needs finite action bounds, got {space!r}")
            low, high = space.low.astype(np.float32), space.high.astype(np.float32)
            self.act_dim, self.action_start = int(low.shape[0]), 0
            self.actor = self.register_module(
                "actor", DeterministicActor(self.encoder.dim, low, high, cfg.hidden_sizes, cfg.activation)
            )
            self.acting_family = "deterministic"

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """One optimizer over the actor (and a trainable encoder)."""
        self._params = [p for m in (self.encoder, self.actor) for p in m.parameters() if p.requires_grad]
        self.register_optimizer("main", build_optimizer(optim_cfg, self._params, fused=self.config.fused_optimizer))

    @torch.no_grad()
    def compute_actions(self, obs: Any, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """The actor's action (Box); the greedy or a sampled action (Discrete)."""
        if self.discrete:
            return categorical_actions(self, obs, deterministic)
        x = self.encoder(obs_to_tensor(obs, self.device))
        return {"action": self.actor(x).float().cpu().numpy()}

    def update_dataset(self, data: Any) -> None:
        """Take a sampled batch (``obs``, ``action``) for the next ``train()``."""
        self.dataset = offline_batch(self, data, "bc", self.REQUIRED_KEYS)

    def train(self) -> Dict[str, float]:
        """One gradient step of the cloning loss.

        Returns:
            bc_loss; accuracy (Discrete: the share of the batch's actions the greedy policy takes).
        """
        if self.dataset is None:
            raise RuntimeError("bc.train() called before update_dataset(data)")
        if "main" not in self._optimizers:
            raise RuntimeError("bc.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        ds = self.dataset
        x = self.encoder(ds["obs"])
        metrics: Dict[str, float] = {}
        if self.discrete:
            logits = mlp_forward(self.actor, x)
            loss = F.cross_entropy(logits, ds["action"])
            metrics["accuracy"] = (logits.argmax(-1) == ds["action"]).float().mean().item()
        else:
            loss = F.mse_loss(self.actor(x), ds["action"])
        self.apply_gradients(
            loss, self._optimizers["main"], self._params, self.config.optim.max_grad_norm, return_norm=False
        )
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        self.update_count += 1
        self.train_calls += 1
        metrics["bc_loss"] = loss.item()
        self._last_metrics = metrics
        return metrics
