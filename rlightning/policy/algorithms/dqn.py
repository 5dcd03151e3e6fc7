"""DQN: Q-learning with a target network for discrete actions, epsilon-greedy exploration.

Epsilon decays linearly from ``epsilon_start`` to ``epsilon_end`` over the
``epsilon_decay_steps`` observation rows each acting worker has answered.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import torch
from pydantic import Field
from torch.nn import functional as F

from rlightning.policy.algorithms.networks import ObsEncoder, action_kind, mlp, mlp_forward
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES


class DQNConfig(PolicyConfig):
    """DQN's hyperparameters (``policy.type: dqn``) on top of the shared `PolicyConfig`."""

    tau: float = Field(0.005, gt=0, le=1)
    """Target network soft-update rate."""
    q_lr: Optional[float] = Field(None, gt=0)
    """Q network learning rate (None: ``optim.lr``)."""
    epsilon_start: float = Field(1.0, ge=0, le=1)
    """Initial exploration rate."""
    epsilon_end: float = Field(0.05, ge=0, le=1)
    """Final exploration rate."""
    epsilon_decay_steps: int = Field(10_000, ge=1)
    """Env steps over which epsilon decays."""


@POLICIES.register("dqn")
class DQNPolicy(BasePolicy):
    """Deep Q-Network (target network with Polyak averaging, Huber loss).

    ``update_dataset`` takes a TensorDict with ``obs``, ``action``, ``reward``,
    ``next_obs``, ``terminated``; each ``train()`` does one gradient update on it.
    """

    config_cls = DQNConfig
    """The config class of ``policy.type: dqn``."""

    supported_action_spaces = ("discrete",)
    """Action space kinds this policy can act in (checked before any worker starts)."""

    sync_module_names = ("encoder", "q")
    REQUIRED_KEYS = ("obs", "action", "reward", "next_obs", "terminated")

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build the Q network (and its target copy on train workers).

        Raises:
            ValueError: a non-Discrete action space.
        """
        self.env_meta = check_env_meta(env_meta, "dqn")
        cfg, space = self.config, env_meta.action_space
        action_kind(space, "dqn", ("discrete",))
        self.n_actions, self.action_start = int(space.n), int(space.start)
        self.encoder = self.register_module(
            "encoder", ObsEncoder(env_meta.observation_space, normalize=cfg.norm_obs, policy_name="dqn")
        )
        self.q = self.register_module("q", mlp(self.encoder.dim, cfg.hidden_sizes, self.n_actions, cfg.activation))
        if not hasattr(self, "np_rng"):
            self.np_rng = np.random.default_rng()
        if self.role_type is PolicyRole.TRAIN:
            target = self.register_module(
                "q_target", mlp(self.encoder.dim, cfg.hidden_sizes, self.n_actions, cfg.activation)
            )
            target.load_state_dict(self.q.state_dict())
            target.requires_grad_(False)

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """One optimizer over the Q network (``q_lr`` when set)."""
        self.register_optimizer("main", build_optimizer(optim_cfg, self.q.parameters(), lr=self.config.q_lr))

    @property
    def epsilon(self) -> float:
        """Exploration rate after the rows this worker has answered."""
        cfg = self.config
        frac = min(1.0, self._rollout_rows / cfg.epsilon_decay_steps)
        return cfg.epsilon_start + frac * (cfg.epsilon_end - cfg.epsilon_start)

    @torch.no_grad()
    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """Greedy actions, replaced by uniform ones with probability epsilon unless deterministic."""
        q = mlp_forward(self.q, self.encoder(torch.as_tensor(obs, device=self.device)))
        action = q.argmax(-1).cpu().numpy().astype(np.int64)
        if not deterministic:
            explore = self.np_rng.random(action.shape[0]) < self.epsilon
            action[explore] = self.np_rng.integers(0, self.n_actions, int(explore.sum()))
        return {"action": action + self.action_start}

    def update_dataset(self, data: Any) -> None:
        """Take a sampled batch for the next ``train()``.

        Raises:
            TypeError: ``data`` is not a TensorDict.
            KeyError: required keys are missing (listed with the keys present).
        """
        from tensordict import TensorDictBase  # here, not at import: env workers acting with a copy never need it

        if not isinstance(data, TensorDictBase):
            raise TypeError(f"dqn.update_dataset needs a TensorDict, got {type(data).__name__}")
        if self.env_meta is None:
            raise RuntimeError("dqn.update_dataset called before construct_network(env_meta)")
        missing = [k for k in self.REQUIRED_KEYS if k not in data.keys()]
        if missing:
            raise KeyError(f"dqn.update_dataset: missing keys {missing}; got {sorted(data.keys())}")
        flat = data.reshape(-1) if len(data.batch_size) > 1 else data
        n = int(flat.batch_size.numel())
        if n == 0:
            raise ValueError("dqn.update_dataset got an empty batch")
        ds = {k: flat.get(k).to(self.device) for k in self.REQUIRED_KEYS}
        ds["action"] = ds["action"].reshape(n).long() - self.action_start
        ds["reward"] = ds["reward"].reshape(n).float()
        ds["terminated"] = ds["terminated"].reshape(n).float()
        self.dataset = ds

    def train(self) -> Dict[str, float]:
        """One TD update against the target network, then Polyak-average the target.

        Returns:
            q_loss, q_value.
        """
        if self.dataset is None:
            raise RuntimeError("dqn.train() called before update_dataset(data)")
        if "main" not in self._optimizers:
            raise RuntimeError("dqn.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds = self.config, self.dataset
        target_net = self.modules["q_target"]
        with torch.no_grad():
            x, next_x = self.encoder(ds["obs"]), self.encoder(ds["next_obs"])
            target = ds["reward"] + cfg.gamma * (1.0 - ds["terminated"]) * target_net(next_x).max(-1).values
        q = self.q(x).gather(1, ds["action"].unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        self.apply_gradients(loss, self._optimizers["main"], self.q.parameters(), cfg.optim.max_grad_norm)
        with torch.no_grad():
            for p, tp in zip(self.q.parameters(), target_net.parameters()):
                tp.lerp_(p, cfg.tau)
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        self.update_count += 1
        self.train_calls += 1
        metrics = {"q_loss": loss.item(), "q_value": float(q.mean().detach())}
        self._last_metrics = metrics
        return metrics
