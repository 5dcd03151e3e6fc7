"""DQN and its Rainbow-style extensions for discrete actions.

- target network: Polyak-averaged with ``tau`` at every gradient step, or (``target_update_interval``)
  updated every that many env steps (``tau=1``: a hard copy), as in Stable-Baselines3;
- ``gradient_steps`` updates per ``train()`` call, each on its own minibatch of the sampled batch
  (sample ``gradient_steps x minibatch`` rows once; SB3's and CleanRL's gradient steps per rollout);
- double DQN (``double_q``), dueling heads (``dueling``), n-step returns (``n_step``: the buffer's
  post-process adds the n-step keys, `NStepReturns`);
- prioritized replay: the importance weights of the sample (``_weight``) scale the loss, with the
  exponent annealed from the buffer's ``priority_beta`` to ``priority_beta_end``; the absolute TD
  errors are handed back through `priority_update` (the engine writes them to the shards);
- initialisation (``init``): orthogonal, or ``nn.Linear``'s own (``torch``: Stable-Baselines3's and CleanRL's);
- speed, with the same learning: Adam/AdamW through torch's fused kernel (``fused_optimizer``; the same update
  up to float rounding), forwards through `mlp_forward`, metrics reduced once per ``train()``; with several
  gradient steps per call and a target network that cannot move during it (hard updates counted in env
  steps), the target network's part of every minibatch's TD target comes from one forward up front, also
  over all the minibatches of `train_minibatches` (an iteration's batches sampled at once);
- exploration: epsilon decays linearly from ``epsilon_start`` to ``epsilon_end`` over
  ``epsilon_decay_steps`` env steps. The env-step count reaches the acting workers with the weights
  (a synced ``progress`` module); an acting copy that has not heard yet counts the rows it answered.
"""

from __future__ import annotations

from typing import Any, Dict, Literal, Optional

import numpy as np
import torch
from pydantic import Field
from torch import nn
from torch.nn import functional as F

from rlightning.policy.algorithms.networks import Progress, action_kind, mlp, mlp_forward
from rlightning.policy.algorithms.nstep import NSTEP_KEYS, NStepReturns
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.networks import batch_len, build_encoder, nest_dotted_keys, obs_to_tensor
from rlightning.policy.networks.masks import action_mask, mask_q, masked_uniform
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import POLICIES

logger = get_logger(__name__)


class DQNConfig(PolicyConfig):
    """DQN's hyperparameters (``policy.type: dqn``) on top of the shared `PolicyConfig`."""

    tau: float = Field(0.005, gt=0, le=1)
    """Target network update rate (1: a hard copy)."""
    target_update_interval: Optional[int] = Field(None, ge=1)
    """Env steps between target updates (SB3's ``target_update_interval``); None: every gradient step."""
    q_lr: Optional[float] = Field(None, gt=0)
    """Q network learning rate (None: ``optim.lr``)."""
    epsilon_start: float = Field(1.0, ge=0, le=1)
    """Initial exploration rate."""
    epsilon_end: float = Field(0.05, ge=0, le=1)
    """Final exploration rate."""
    epsilon_decay_steps: int = Field(10_000, ge=1)
    """Env steps over which epsilon decays linearly."""
    gradient_steps: int = Field(1, ge=1)
    """Gradient updates per ``train()`` call, each on 1/gradient_steps of the sampled batch."""
    double_q: bool = False
    """Double DQN: the online network picks the next action, the target network values it."""
    dueling: bool = False
    """Dueling head: Q = V + A - mean(A)."""
    n_step: int = Field(1, ge=1)
    """Horizon of the bootstrapped returns (the buffer post-process adds the n-step keys)."""
    loss: Literal["huber", "mse"] = "huber"
    """TD loss."""
    init: Literal["orthogonal", "torch"] = "orthogonal"
    """Q-network weights at the start: ``orthogonal`` (gain sqrt(2) hidden, 1 output, zero biases: the
    actor-critic init) or ``torch`` (``nn.Linear``'s own uniform init, as Stable-Baselines3's and CleanRL's DQN)."""
    priority_beta_start: float = Field(0.4, gt=0, le=1)
    """Importance-weight exponent the prioritized sampler uses (must equal ``buffer.priority_beta``)."""
    priority_beta_end: float = Field(1.0, gt=0, le=1)
    """Exponent reached after ``priority_beta_steps`` env steps."""
    priority_beta_steps: Optional[int] = Field(None, ge=1)
    """Env steps over which the exponent anneals linearly (None: kept at ``priority_beta_start``)."""
    fused_optimizer: bool = True
    """Adam/AdamW through torch's fused kernel (one kernel per step instead of about ten small ops per
    parameter tensor: a fifth of a CartPole gradient step on CPU); the same update up to float rounding.
    False: torch's default implementation. Other optimizers are unaffected."""


class DuelingHead(nn.Module):
    """Q(s, .) = V(s) + A(s, .) - mean_a A(s, a), from two MLPs over the features."""

    def __init__(self, in_dim: int, n_actions: int, hidden, activation: str) -> None:
        super().__init__()
        self.value = mlp(in_dim, hidden, 1, activation)
        self.advantage = mlp(in_dim, hidden, n_actions, activation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        adv = mlp_forward(self.advantage, x)
        return mlp_forward(self.value, x) + adv - adv.mean(-1, keepdim=True)


@POLICIES.register("dqn")
class DQNPolicy(BasePolicy):
    """Deep Q-Network with target network, double Q, dueling heads, n-step returns and prioritized replay.

    ``update_dataset`` takes a TensorDict with ``obs``, ``action``, ``reward``, ``next_obs``,
    ``terminated`` (and the n-step keys when ``n_step > 1``; ``_weight``, ``_index``, ``_shard``
    from the prioritized sampler); each ``train()`` does ``gradient_steps`` updates on it.
    """

    config_cls = DQNConfig
    """The config class of ``policy.type: dqn``."""

    supported_action_spaces = ("discrete",)
    """Action space kinds this policy can act in (checked before any worker starts)."""

    sync_module_names = ("encoder", "q", "progress")
    learns_from_transitions = True
    minibatch_train = True
    REQUIRED_KEYS = ("obs", "action", "reward", "next_obs", "terminated")

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg: DQNConfig) -> Optional[NStepReturns]:
        """The n-step post-process when ``n_step > 1`` (None: transitions are stored as they are)."""
        n = int(getattr(policy_cfg, "n_step", 1))
        return NStepReturns(n, policy_cfg.gamma) if n > 1 else None

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build the Q network (and its target copy on train workers).

        Raises:
            ValueError: a non-Discrete action space.
        """
        self.env_meta = check_env_meta(env_meta, "dqn")
        cfg, space = self.config, env_meta.action_space
        action_kind(space, "dqn", ("discrete",))
        self.n_actions, self.action_start = int(space.n), int(space.start)
        make_encoder = lambda: build_encoder(  # noqa: E731
            env_meta.observation_space, cnn=cfg.cnn, normalize=cfg.norm_obs, policy_name="dqn"
        )
        self.encoder = self.register_module("encoder", make_encoder())
        self.q = self.register_module("q", self._head())
        self.progress = self.register_module("progress", Progress())
        if self.env_steps is not None:
            self.progress.env_steps.fill_(float(self.env_steps))
        if not hasattr(self, "np_rng"):
            self.np_rng = np.random.default_rng()
        self._target_marks = -1
        self._warned_no_env_steps = False
        self.batched_targets = True  # see train(); False: each minibatch's targets computed on their own
        self.priority_updates: Optional[Dict[str, torch.Tensor]] = None
        self.trainable_encoder = any(p.requires_grad for p in self.encoder.parameters())
        if self.role_type is not PolicyRole.TRAIN:
            return
        target = self.register_module("q_target", self._head())
        target.load_state_dict(self.q.state_dict())
        target.requires_grad_(False)
        if self.trainable_encoder:
            enc_target = self.register_module("encoder_target", make_encoder())
            enc_target.load_state_dict(self.encoder.state_dict())
            enc_target.requires_grad_(False)

    def _head(self) -> nn.Module:
        cfg = self.config
        if cfg.dueling:
            head = DuelingHead(self.encoder.dim, self.n_actions, cfg.hidden_sizes, cfg.activation)
        else:
            head = mlp(self.encoder.dim, cfg.hidden_sizes, self.n_actions, cfg.activation)
        if cfg.init == "torch":  # mlp() initialises orthogonally; back to nn.Linear's own init
            for layer in head.modules():
                if isinstance(layer, nn.Linear):
                    layer.reset_parameters()
        return head

    def _online_params(self):
        params = list(self.q.parameters())
        if self.trainable_encoder:
            params += [p for p in self.encoder.parameters() if p.requires_grad]
        return params

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """One optimizer over the Q network (and a trainable encoder), ``q_lr`` when set (fused Adam/AdamW
        unless ``fused_optimizer`` is False or the parameters' device has no fused kernel)."""
        self._params = self._online_params()
        optimizer = build_optimizer(optim_cfg, self._params, lr=self.config.q_lr, fused=self.config.fused_optimizer)
        self.register_optimizer("main", optimizer)

    # ------------------------------------------------------------------ schedules

    def set_env_steps(self, env_steps: int) -> None:
        """Record the run's env steps (schedules); acting workers receive it with the next weight sync."""
        super().set_env_steps(env_steps)
        progress = self._modules.get("progress")
        if progress is not None:  # before construct_network the count waits in self.env_steps
            progress.env_steps.fill_(float(self.env_steps))

    @property
    def schedule_steps(self) -> int:
        """Env steps the schedules run on: the engine's count, or this worker's answered rows when larger."""
        return max(int(self.progress.env_steps), self._rollout_rows)

    @property
    def epsilon(self) -> float:
        """Exploration rate at `schedule_steps`."""
        cfg = self.config
        frac = min(1.0, self.schedule_steps / cfg.epsilon_decay_steps)
        return cfg.epsilon_start + frac * (cfg.epsilon_end - cfg.epsilon_start)

    @property
    def priority_beta(self) -> float:
        """Importance-weight exponent at `schedule_steps`."""
        cfg = self.config
        if cfg.priority_beta_steps is None:
            return cfg.priority_beta_start
        frac = min(1.0, self.schedule_steps / cfg.priority_beta_steps)
        return cfg.priority_beta_start + frac * (cfg.priority_beta_end - cfg.priority_beta_start)

    # ------------------------------------------------------------------ acting

    def q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Q(obs, .) of the online network, ``[B, n_actions]``."""
        return mlp_forward(self.q, self.encoder(obs))

    @torch.no_grad()
    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        """Greedy actions, replaced by uniform ones with probability epsilon unless deterministic; both among
        the actions the observations' ``action_mask`` allows, when they carry one."""
        mask = action_mask(obs)
        if deterministic:
            q = mask_q(self.q_values(obs_to_tensor(obs, self.device)), mask)
            return {"action": q.argmax(-1).cpu().numpy().astype(np.int64) + self.action_start}
        explore = self.np_rng.random(batch_len(obs)) < self.epsilon
        count = int(np.count_nonzero(explore))
        if count == explore.shape[0]:  # every row explores: the greedy actions would all be replaced
            action = np.zeros(count, dtype=np.int64)
        else:
            q = mask_q(self.q_values(obs_to_tensor(obs, self.device)), mask)
            action = q.argmax(-1).cpu().numpy().astype(np.int64)
        action[explore] = masked_uniform(mask, self.n_actions, np.flatnonzero(explore), self.np_rng)
        return {"action": action + self.action_start}

    # ------------------------------------------------------------------ learning

    def update_dataset(self, data: Any) -> None:
        """Take a sampled batch for the next ``train()``.

        Raises:
            TypeError: ``data`` is not a TensorDict.
            KeyError: required keys are missing (listed with the keys present).
            ValueError: an empty batch, or fewer rows than ``gradient_steps``.
        """
        from tensordict import TensorDictBase  # here, not at import: env workers acting with a copy never need it

        if not isinstance(data, TensorDictBase):
            raise TypeError(f"dqn.update_dataset needs a TensorDict, got {type(data).__name__}")
        if self.env_meta is None:
            raise RuntimeError("dqn.update_dataset called before construct_network(env_meta)")
        data = nest_dotted_keys(data)  # dict observations sampled as "obs.<key>" columns
        cfg = self.config
        keys = set(data.keys())
        required = self.REQUIRED_KEYS + (NSTEP_KEYS if cfg.n_step > 1 else ())
        missing = [k for k in required if k not in keys]
        if missing:
            hint = " (n_step > 1: the buffer's n-step post-process, DQNPolicy.buffer_postprocess_fn, adds them)"
            raise KeyError(
                f"dqn.update_dataset: missing keys {missing}; got {sorted(keys)}"
                + (hint if any(k in NSTEP_KEYS for k in missing) else "")
            )
        flat = data.reshape(-1) if len(data.batch_size) > 1 else data
        n = int(flat.batch_size.numel())
        if n == 0:
            raise ValueError("dqn.update_dataset got an empty batch")
        if n < cfg.gradient_steps:
            raise ValueError(f"dqn.update_dataset got {n} rows, fewer than gradient_steps={cfg.gradient_steps}")
        if cfg.n_step > 1:
            ds = {
                "obs": flat.get("obs"),
                "reward": flat.get("nstep_reward"),
                "next_obs": flat.get("nstep_next_obs"),
                "discount": flat.get("nstep_discount"),
            }
        else:
            not_term = 1.0 - flat.get("terminated").reshape(n).float()
            ds = {"obs": flat.get("obs"), "reward": flat.get("reward"), "next_obs": flat.get("next_obs")}
            ds["discount"] = cfg.gamma * not_term
        ds["action"] = flat.get("action").reshape(n).long() - self.action_start
        ds = {k: v.to(self.device) for k, v in ds.items()}
        ds["reward"] = ds["reward"].reshape(n).float()
        ds["discount"] = ds["discount"].reshape(n).float()
        ds["weight"] = flat.get("_weight").reshape(n).float().to(self.device) if "_weight" in keys else None
        # the prioritized sampler's slots (and shards) of the rows, sliced with them into minibatches
        ds["index"] = flat.get("_index").reshape(n).to(self.device) if "_index" in keys else None
        ds["shard"] = flat.get("_shard").reshape(n).to(self.device) if "_shard" in keys else None
        self.dataset = ds

    def target_q_values(self, obs: torch.Tensor) -> torch.Tensor:
        """Q_target(obs, .) of the target network (no gradient), ``[B, n_actions]``."""
        with torch.no_grad():
            target_enc = self.modules["encoder_target"] if self.trainable_encoder else self.encoder
            return mlp_forward(self.modules["q_target"], target_enc(obs))

    def td_targets(
        self,
        reward: torch.Tensor,
        discount: torch.Tensor,
        next_obs: torch.Tensor,
        next_q_target: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """``reward + discount * Q_target(next_obs, a*)``, a* greedy under the online (double) or target network,
        among the actions ``next_obs``'s ``action_mask`` allows (when it carries one).

        ``next_q_target``: `target_q_values` of ``next_obs`` when already computed (a train phase whose target
        network stays put computes them for all its minibatches in one forward).
        """
        with torch.no_grad():
            next_q = self.target_q_values(next_obs) if next_q_target is None else next_q_target
            mask = action_mask(next_obs)
            if self.config.double_q:
                best = mask_q(self.q_values(next_obs), mask).argmax(-1, keepdim=True)
                next_v = next_q.gather(1, best).squeeze(1)
            else:
                next_v = mask_q(next_q, mask).max(-1).values
            return reward + discount * next_v

    def loss(self, batch: Dict[str, Any]) -> Dict[str, torch.Tensor]:
        """The weighted TD loss of one minibatch: ``loss``, ``q`` (taken actions), ``td_error``.

        ``batch`` may carry its ``target`` (the TD targets) or ``next_q_target`` (the target network's
        Q of ``next_obs``), computed ahead for the whole train phase; otherwise they are computed here.
        """
        target = batch.get("target")
        if target is None:
            target = self.td_targets(batch["reward"], batch["discount"], batch["next_obs"], batch.get("next_q_target"))
        q = self.q_values(batch["obs"]).gather(1, batch["action"].unsqueeze(1)).squeeze(1)
        if self.config.loss == "huber":
            per_row = F.smooth_l1_loss(q, target, reduction="none")
        else:
            per_row = F.mse_loss(q, target, reduction="none")
        weight = batch.get("weight")
        if weight is not None:
            weight = weight ** (self.priority_beta / self.config.priority_beta_start)
            weight = weight / weight.max()
            per_row = per_row * weight
        return {"loss": per_row.mean(), "q": q, "td_error": (target - q).detach()}

    def _update_target(self, tau: float) -> None:
        pairs = [(self.q, self.modules["q_target"])]
        if self.trainable_encoder:
            pairs.append((self.encoder, self.modules["encoder_target"]))
        with torch.no_grad():
            for online, target in pairs:
                for p, tp in zip(online.parameters(), target.parameters()):
                    tp.lerp_(p, tau)

    def _scheduled_target_update(self) -> None:
        """Update the target once per ``target_update_interval`` env steps passed (gradient steps when untold)."""
        interval = self.config.target_update_interval
        if self.env_steps is None:
            if not self._warned_no_env_steps:
                logger.warning(
                    "dqn: target_update_interval counts env steps, but set_env_steps was never called; "
                    "counting gradient steps instead"
                )
                self._warned_no_env_steps = True
            marks = self.update_count // interval
        else:
            marks = self.env_steps // interval
        if marks > self._target_marks:
            self._update_target(self.config.tau)
            self._target_marks = marks

    def _target_fixed_for_phase(self) -> bool:
        """True when the target network cannot move during this ``train()``: hard updates counted in env
        steps (told before the phase, so the one update it calls for happens first)."""
        return self.config.target_update_interval is not None and self.env_steps is not None

    def _phase_targets(self, ds: Dict[str, Any]) -> Dict[str, torch.Tensor]:
        """The TD targets of every row (plain DQN), or the target network's Q of every ``next_obs`` (double DQN:
        the online argmax moves with each gradient step), in one forward for the whole phase."""
        if self.config.double_q:
            return {"next_q_target": self.target_q_values(ds["next_obs"])}
        return {"target": self.td_targets(ds["reward"], ds["discount"], ds["next_obs"])}

    def train(self) -> Dict[str, float]:
        """``gradient_steps`` TD updates, each on its own minibatch, with the target updates they call for.

        When the target network stays put for the whole call (`_target_fixed_for_phase`) and there are
        several gradient steps, the target network's part of every minibatch's TD target is computed in
        one forward up front (``batched_targets``; the same values as per minibatch). Metrics are reduced
        once per call.

        Returns:
            q_loss, q_value (means over the updates); priority_beta with prioritized batches.
        """
        if self.dataset is None:
            raise RuntimeError("dqn.train() called before update_dataset(data)")
        if "main" not in self._optimizers:
            raise RuntimeError("dqn.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds = self.config, self.dataset
        n = ds["obs"].shape[0]
        steps = cfg.gradient_steps
        optimizer, params = self._optimizers["main"], self._params
        hard_updates = cfg.target_update_interval is not None
        fixed = self._target_fixed_for_phase()
        if fixed:  # env steps do not move during the phase: at most one update, before the first step
            self._scheduled_target_update()
        given = "target" in ds or "next_q_target" in ds  # computed ahead by train_minibatches
        ahead = self._phase_targets(ds) if fixed and steps > 1 and self.batched_targets and not given else {}
        prioritized = ds.get("index") is not None
        if steps == 1:
            parts = [None]
        else:
            parts = torch.randperm(n, device=self.device).tensor_split(steps)
            abs_td = torch.empty(n, device=self.device) if prioritized else None
        losses, q_means = [], []
        for idx in parts:
            if hard_updates and not fixed:
                self._scheduled_target_update()
            if idx is None:
                batch = ds
            else:
                batch = {k: (None if v is None else v[idx]) for k, v in ds.items()}
                batch.update({k: v[idx] for k, v in ahead.items()})
            out = self.loss(batch)
            self.apply_gradients(out["loss"], optimizer, params, cfg.optim.max_grad_norm, return_norm=False)
            if not hard_updates:
                self._update_target(cfg.tau)
            if prioritized:  # the rows' new priorities
                if idx is None:
                    abs_td = out["td_error"].abs()
                else:
                    abs_td[idx] = out["td_error"].abs()
            losses.append(out["loss"].detach())
            q_means.append(out["q"].detach().mean())
            self.update_count += 1
        if self.encoder.normalize:
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(ds["obs"])))
        if prioritized:
            self.hand_back_priorities(ds, abs_td)
        self.train_calls += 1
        if steps == 1:
            metrics = {"q_loss": losses[0].item(), "q_value": q_means[0].item()}
        else:  # one reduction (and one device sync) per call, in float64 as the per-step floats were
            stats = torch.stack([torch.stack(losses), torch.stack(q_means)]).double().mean(1).tolist()
            metrics = {"q_loss": stats[0], "q_value": stats[1]}
        if ds["weight"] is not None:
            metrics["priority_beta"] = self.priority_beta
        self._last_metrics = metrics
        return metrics

    def train_minibatches(self, num_minibatches: int) -> Dict[str, float]:
        """``num_minibatches`` x `train` on consecutive row ranges of the dataset (see
        `rlightning.policy.minibatches`), the same updates as one ``update_dataset`` and ``train`` each.

        When the target network stays put for the whole call (`_target_fixed_for_phase`, and no running
        observation normalisation, which moves after every ``train()``), the target network's part of every
        row's TD target is computed in one forward up front (``batched_targets``), as `train` does for its
        ``gradient_steps``. With prioritized rows the priorities of every minibatch are handed back together
        (`priority_update`); the engine uses this call with the uniform sampler only, writing priorities back
        after each step otherwise.
        """
        from rlightning.policy.minibatches import train_minibatches

        ds = self.dataset
        many = isinstance(num_minibatches, int) and not isinstance(num_minibatches, bool) and num_minibatches > 1
        if not many or not isinstance(ds, dict) or "main" not in self._optimizers:
            return train_minibatches(self, num_minibatches)  # checks the arguments and raises, or one train()
        ahead: Dict[str, torch.Tensor] = {}
        if self.batched_targets and self._target_fixed_for_phase() and not self.encoder.normalize:
            self._scheduled_target_update()  # the one update the phase calls for, before its targets
            ahead = self._phase_targets(ds)
        updates = []

        def collect_priorities() -> None:
            if self.priority_updates is not None:
                updates.append(self.priority_updates)
                self.priority_updates = None

        self.dataset = {**ds, **ahead}
        try:
            metrics = train_minibatches(self, num_minibatches, after_step=collect_priorities)
        finally:
            self.dataset = ds  # without the targets computed ahead: the target network may move before reuse
        if updates:
            self.priority_updates = {k: torch.cat([u[k] for u in updates]) for k in ("index", "shard", "priority")}
        return metrics

    def hand_back_priorities(self, ds: Dict[str, Any], abs_td: torch.Tensor) -> None:
        """Keep the prioritized batch ``ds``'s rows (``index``, ``shard``) with their new priorities ``abs_td``
        (absolute TD errors) for `priority_update`."""
        index = ds["index"].cpu()
        shard = ds["shard"].cpu() if ds.get("shard") is not None else torch.zeros_like(index)
        self.priority_updates = {"index": index, "shard": shard, "priority": abs_td.cpu()}

    def priority_update(self) -> Optional[Dict[str, torch.Tensor]]:
        """The last prioritized batch's ``index``, ``shard`` and new ``priority`` (absolute TD errors), once.

        Returns None when there is nothing new (no prioritized batch trained on since the last call).
        """
        out, self.priority_updates = self.priority_updates, None
        return out

    def extra_checkpoint_state(self) -> Dict[str, Any]:
        """Target-update bookkeeping and the env steps last told."""
        return {"target_marks": int(self._target_marks), "env_steps": -1 if self.env_steps is None else self.env_steps}

    def load_extra_checkpoint_state(self, extra: Dict[str, Any]) -> None:
        """Restore `extra_checkpoint_state`."""
        self._target_marks = int(extra.get("target_marks", -1))
        steps = int(extra.get("env_steps", -1))
        if steps >= 0:
            self.set_env_steps(steps)
