"""PPO: clipped-objective actor-critic for discrete and continuous actions.

An encoder chosen from the observation space (MLP features, a CNN for images,
one per key of a Dict/Tuple; `build_encoder`) under separate MLP actor and
critic heads (orthogonal init); the action head follows the action space
(`ActionHead`): Categorical for ``Discrete``, one Categorical per entry for
``MultiDiscrete``, Bernoulli bits for ``MultiBinary``, a Gaussian with a
state-independent log std for ``Box``; optional running observation normalisation (kept in the
policy, synced with the weights). Advantages and returns come from the
buffer's GAE postprocess (``buffer_postprocess_fn``).

Continuous responses carry ``action`` clipped to the Box bounds (what the env
runs) and ``raw_action``, the unclipped sample the log-probability belongs to;
``train`` learns from ``raw_action`` when the dataset has it.

With ``recurrent: lstm`` (or ``gru``) an LSTM/GRU core sits between the encoder and the heads; acting
carries its state per env worker and training runs over sequences (`rlightning.policy.algorithms.recurrent_ppo`).
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Literal, Optional, Sequence, Tuple

import numpy as np
import torch
from pydantic import Field

from rlightning.policy.algorithms import numpy_acting
from rlightning.policy.algorithms.acting_mlp import call_module
from rlightning.policy.algorithms.networks import categorical_draw, mlp, mlp_forward
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.networks import build_encoder, nest_dotted_keys, obs_to_tensor
from rlightning.policy.networks.heads import ActionHead, GaussianActor
from rlightning.policy.networks.masks import LogitMask, action_mask, action_mask_np, mask_logits, masked_log_softmax
from rlightning.policy.networks.recurrent import RecurrentStreams, build_recurrent_core
from rlightning.policy.utils import build_optimizer, check_env_meta
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import POLICIES

logger = get_logger(__name__)


class PPOConfig(PolicyConfig):
    """PPO's hyperparameters (``policy.type: ppo``) on top of the shared `PolicyConfig`."""

    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE lambda."""
    clip_coef: float = Field(0.2, gt=0)
    """Clipping range of the probability ratio."""
    anneal_clip: bool = False
    """Decay ``clip_coef`` linearly to zero over the run (``train.iterations``, or ``train.total_env_steps`` when
    that ends the run first), as ``optim.anneal_lr`` decays the learning rate (Stable-Baselines3's
    ``clip_range`` schedule; rl-baselines3-zoo's ``lin_0.2``)."""
    clip_vloss: bool = True
    """Clip the value loss too: the new value may move at most ``vf_clip_coef`` from the value it acted with."""
    vf_clip_coef: Optional[float] = Field(None, gt=0)
    """Clip range of the value loss, in return units (Stable-Baselines3's ``clip_range_vf``; it takes effect
    with ``clip_vloss``); None: the probability ratio's ``clip_coef`` (annealed with it), as CleanRL does."""
    ent_coef: float = Field(0.0, ge=0)
    """Entropy bonus coefficient."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss coefficient."""
    update_epochs: int = Field(4, ge=1)
    """Passes over each rollout."""
    num_minibatches: int = Field(4, ge=1)
    """Minibatches per epoch."""
    norm_adv: bool = True
    """Normalise advantages per minibatch."""
    target_kl: Optional[float] = Field(None, gt=0)
    """Stop the epochs early when the approximate KL exceeds this."""
    fused_optimizer: bool = False
    """Adam/AdamW through torch's fused kernel (one kernel per step instead of about ten small ops per parameter;
    the same update up to float rounding) where the parameters' device has one. Small networks train faster."""
    recurrent: Optional[Literal["lstm", "gru"]] = None
    """A recurrent core between encoder and heads (``lstm`` or ``gru``; None: feed-forward). It trains on
    sequences: set ``buffer.unit: episode``."""
    recurrent_size: int = Field(128, ge=1)
    """Hidden size of the recurrent core."""
    recurrent_shared: bool = False
    """One core for actor and critic (as CleanRL's ``ppo_atari_lstm``); False: one each (sb3-contrib's
    ``RecurrentPPO`` default), so the value loss does not shape the actor's core."""


__all__ = ["GaussianActor", "PPOConfig", "PPOPolicy"]


@POLICIES.register("ppo")
class PPOPolicy(BasePolicy):
    """Proximal Policy Optimization (clipped objective, GAE, minibatch epochs).

    ``update_dataset`` takes a TensorDict with ``obs``, ``action`` (or
    ``raw_action``), ``log_prob``, ``value``, ``advantage`` and ``return``;
    ``train`` runs ``update_epochs`` x ``num_minibatches`` updates.
    """

    config_cls = PPOConfig
    """The config class of ``policy.type: ppo``."""

    supported_action_spaces = ("discrete", "multi_discrete", "multi_binary", "continuous")
    """Action space kinds this policy can act in (checked before any worker starts)."""

    REQUIRED_KEYS = ("obs", "log_prob", "value", "advantage", "return")

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg: PPOConfig) -> Optional[Callable]:
        """The GAE postprocess (``advantage`` and ``return``) with the config's gamma and lambda."""
        from rlightning.buffer.utils.utils import make_gae_postprocess_fn

        return make_gae_postprocess_fn(policy_cfg.gamma, policy_cfg.gae_lambda)

    @classmethod
    def check_run_config(cls, config: Any) -> None:
        """Rules between ``policy`` and the other sections of a run's `MainConfig` (before any actor starts).

        Raises:
            ValueError: a recurrent policy with a transition buffer (it trains on sequences), or acting in
                several eval workers (each env worker's state lives in the one worker that acts for it).
        """
        kind = getattr(config.policy, "recurrent", None)
        if kind is None:
            return
        if config.buffer.unit != "episode":
            raise ValueError(
                f"policy.recurrent={kind!r} trains on sequences (pieces of episodes): set buffer.unit to 'episode' "
                f"(got {config.buffer.unit!r})"
            )
        cluster = config.cluster
        acting_eval = cluster.inference == "eval_workers" or config.engine == "eval"
        if acting_eval and cluster.eval_worker_num > 1:
            raise ValueError(
                f"policy.recurrent={kind!r} carries each env worker's state in the worker that acts for it, but "
                f"cluster.eval_worker_num={cluster.eval_worker_num} eval workers share the env workers' steps; use "
                "cluster.eval_worker_num=1 or cluster.inference='env_workers' (every env worker acts itself)"
            )

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build encoder, actor and critic for the env's spaces.

        Raises:
            ValueError: an unsupported observation or action space.
        """
        self.env_meta = check_env_meta(env_meta, "ppo")
        cfg = self.config
        act_space = env_meta.action_space
        self.head = ActionHead(act_space, "ppo", self.supported_action_spaces)
        self.kind = self.head.kind
        self.action_start = self.head.start if self.kind == "discrete" else 0
        self.encoder = self.register_module(
            "encoder",
            build_encoder(env_meta.observation_space, cnn=cfg.cnn, normalize=cfg.norm_obs, policy_name="ppo"),
        )
        dim = self.encoder.dim
        self.core = None
        if getattr(cfg, "recurrent", None) is not None:  # subclasses' configs (A2C) may have no recurrent field
            core = build_recurrent_core(cfg.recurrent, dim, cfg.recurrent_size, shared=cfg.recurrent_shared)
            self.core = self.register_module("core", core)
            self.streams = RecurrentStreams(self.core)
            dim = self.core.dim
        self.actor = self.register_module("actor", self.head.build_actor(dim, cfg.hidden_sizes, cfg.activation))
        self.critic = self.register_module("critic", mlp(dim, cfg.hidden_sizes, 1, cfg.activation, out_gain=1.0))
        self._anneal_warned = False
        self.clip_range = getattr(cfg, "clip_coef", None)  # the ratio's clip range of the current train() call

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """One optimizer over actor and critic (fused Adam/AdamW with ``fused_optimizer``)."""
        self.base_lr = float(optim_cfg.lr)
        fused = bool(getattr(self.config, "fused_optimizer", False))
        self.register_optimizer("main", build_optimizer(optim_cfg, self.get_trainable_parameters(), fused=fused))

    # ------------------------------------------------------------------ acting

    @property
    def stateful_acting(self) -> bool:
        """True with a recurrent core: acting needs the EnvRets (env ids, episode starts), not only observations."""
        return getattr(self, "core", None) is not None

    def _rollout_batched(self, env_rets: Sequence[Any]):
        # A recurrent policy reads each EnvRet's env id and episode starts around compute_actions.
        if getattr(self, "core", None) is None or not env_rets:
            return super()._rollout_batched(env_rets)
        self.streams.begin(env_rets, self.deterministic, self.device)  # per thread (an async eval worker's calls)
        try:
            return super()._rollout_batched(env_rets)
        finally:
            self.streams.abandon()  # nothing pending after a commit; after a failure the streams stay as they were

    def _dist(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None):
        return self.head.distribution(self.actor(x), mask)

    def _log_prob_entropy(self, dist, action: torch.Tensor):
        return self.head.log_prob_entropy(dist, action)

    def log_prob_entropy(
        self, x: torch.Tensor, action: torch.Tensor, mask: Optional[torch.Tensor] = None
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities and entropies of ``action`` under the actor's distribution at features ``x``
        (restricted by the action ``mask``, if any), with gradients (what a loss written outside this class, such
        as recurrent PPO's, differentiates)."""
        return self._log_prob_entropy(self._dist(x, mask), action)

    def _train_forward(self, x: torch.Tensor, action: torch.Tensor, mask: Any = None):
        """Log-probabilities and entropies of ``action`` and the values at features ``x`` (with gradients),
        under the action ``mask`` when the observations carry one (a bool mask, or for discrete actions the
        dataset's `LogitMask`).

        Discrete actions skip the torch ``Categorical`` (its argument checks and second normalisation cost
        about a fifth of a CartPole minibatch update): the same log-softmax, gather and entropy by hand.
        """
        value = mlp_forward(self.critic, x).squeeze(-1)
        if self.kind != "discrete":
            logp, entropy = self.log_prob_entropy(x, action, mask)
            return logp, entropy, value
        logp_all, entropy = masked_log_softmax(mlp_forward(self.actor, x), mask)
        logp = logp_all.gather(-1, action.unsqueeze(-1)).squeeze(-1)
        return logp, entropy, value

    def compute_actions(
        self, obs: np.ndarray, deterministic: bool = False, with_value: bool = True
    ) -> Dict[str, np.ndarray]:
        """Sample (or take the mode of) the action distribution; also ``log_prob`` and ``value``.

        ``with_value=False`` leaves ``value`` out (an env worker asks `compute_values` for a whole rollout's
        observations at once instead, where `values_after_rollout` says it may).

        With a recurrent core the outputs also hold the state the step acted from (``recurrent_h``, and
        ``recurrent_c`` for an LSTM) and ``is_init``; called through ``rollout_batch`` (the EnvRets) the state
        carries over per env worker, called directly every call starts from a zero state.

        Eval-role copies with discrete actions, vector observations and plain MLP heads on the CPU act in numpy
        (`_act_numpy`); everything else in torch. A Dict observation's ``action_mask`` entry restricts the
        distribution (`rlightning.policy.networks.masks`).
        """
        if self.role_type is PolicyRole.EVAL and self.kind == "discrete" and getattr(self, "core", None) is None:
            out = None
            if type(obs) is np.ndarray:  # the per-step case: an array, no mask
                out = self._act_numpy(obs, deterministic, with_value, None)
            elif not isinstance(obs, torch.Tensor):  # a device env's tensors: acted on in torch, answered in torch
                out = self._act_numpy(obs, deterministic, with_value, action_mask_np(obs))
            if out is not None:
                return out
        mask = action_mask(obs, self.device)
        with torch.no_grad():  # here, not as a decorator: the numpy path above would pay for it every step
            return self._act_torch(obs, deterministic, with_value, mask)

    @property
    def values_after_rollout(self) -> bool:
        """True when an env worker may act without ``value`` and compute the values of all the rollout's
        observations when it ends, in blocks (`compute_values`): the same values (the weights do not change
        within a rollout), without a critic pass per step.

        Only for eval-role copies of this class's own acting (``compute_actions`` neither overridden nor replaced
        on the instance), without a recurrent core, whose encoder has no weights of its own (``ObsEncoder``: the
        critic's pass is all that is repeated). A CNN encoder shared by the actor and the critic would run twice:
        it acts with the value.
        """
        return (
            type(self).compute_actions is PPOPolicy.compute_actions
            and "compute_actions" not in self.__dict__  # not replaced on the instance either
            and self.role_type is PolicyRole.EVAL
            and getattr(self, "core", None) is None
            and callable(getattr(self.encoder, "numpy_features", None))
        )

    def compute_values(self, obs: Any) -> np.ndarray:
        """The critic's values of a batch of observations ``[B, ...]`` (float32 ``[B]``): what `compute_actions`
        returns as ``value`` for them, computed ``numpy_acting.VALUE_BLOCK`` rows at a time.

        Raises:
            ValueError: a policy with a recurrent core (its values depend on the state each step acted from).
        """
        if getattr(self, "core", None) is not None:
            raise ValueError(
                f"{type(self).__name__}.compute_values: a recurrent policy's values depend on the state each step "
                "acted from; they come with its actions (compute_actions through rollout_batch)"
            )
        if self.role_type is PolicyRole.EVAL:
            features = self.encoder.numpy_features(obs) if hasattr(self.encoder, "numpy_features") else None
            if features is not None:
                value = numpy_acting.values_np(features, self.critic)
                if value is not None:
                    return value
        block = numpy_acting.VALUE_BLOCK
        out = []
        with torch.no_grad():
            for start in range(0, len(obs), block):
                x = call_module(self.encoder, obs_to_tensor(obs[start : start + block], self.device))
                out.append(mlp_forward(self.critic, x).squeeze(-1).float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)

    def _act_torch(
        self, obs: np.ndarray, deterministic: bool, with_value: bool = True, mask: Optional[torch.Tensor] = None
    ) -> Dict[str, np.ndarray]:
        """`compute_actions` in torch (under ``no_grad``), under the action ``mask`` (`masks.action_mask`).

        Outputs are numpy arrays, or tensors on the observation's device when ``obs`` is a tensor (a
        device-resident env: nothing leaves its device).
        """
        x = call_module(self.encoder, obs_to_tensor(obs, self.device))
        out_np = _outputs_as(obs)
        recurrent, x_vf = None, x
        if getattr(self, "core", None) is not None:
            x, x_vf, recurrent = self._core_step(x)
        value = mlp_forward(self.critic, x_vf).squeeze(-1) if with_value else None
        if self.kind == "discrete":
            # The categorical distribution by hand: building a torch Categorical per step (argument
            # checks, a second normalisation) cost as much as the two forward passes on CartPole;
            # torch.multinomial (its sample) two to three times the Gumbel-max draw.
            logp_all = torch.log_softmax(mask_logits(mlp_forward(self.actor, x), mask), dim=-1)
            sample = logp_all.argmax(-1) if deterministic else categorical_draw(logp_all)
            log_prob = logp_all.gather(-1, sample.unsqueeze(-1)).squeeze(-1)
            out = {
                "log_prob": out_np(log_prob.float()),
                "action": out_np(sample if self.action_start == 0 else sample + self.action_start),
            }
            if value is not None:
                out["value"] = out_np(value.float())
            if recurrent is not None:
                out.update(recurrent)
            return out
        dist = self._dist(x, mask)
        sample = self.head.mode(dist) if deterministic else dist.sample()
        log_prob, _ = self._log_prob_entropy(dist, sample)
        out = {"log_prob": out_np(log_prob.float()), "action": out_np(self.head.to_env(sample, as_tensor=True))}
        if value is not None:
            out["value"] = out_np(value.float())
        if self.kind == "continuous":
            out["raw_action"] = out_np(sample.float())
        if recurrent is not None:
            out.update(recurrent)
        return out

    def _act_numpy(
        self, obs: Any, deterministic: bool, with_value: bool = True, mask: Optional[np.ndarray] = None
    ) -> Optional[Dict[str, np.ndarray]]:
        """`compute_actions` of a discrete policy in numpy (`numpy_acting.act_categorical_np`: the same function
        up to float rounding, its draws from the copy's generator), under the action ``mask``
        (`masks.action_mask_np`); None where the encoder or a head has no numpy form (then torch acts)."""
        features = getattr(self.encoder, "numpy_features", None)
        rng = getattr(self, "np_rng", None)
        if rng is None:  # a copy set up without a seed
            rng = self.np_rng = np.random.default_rng()
        out = numpy_acting.act_categorical_np(
            features(obs) if features is not None else None,
            self.actor,
            self.critic if with_value else None,
            deterministic,
            rng,
            mask,
        )
        if out is not None and self.action_start != 0:
            out["action"] = out["action"] + self.action_start
        return out

    def _core_step(self, x: torch.Tensor):
        """One core step on features ``x``; the state before it (and ``is_init``) as numpy record extras."""
        acting = self.streams.current()
        if acting is not None and acting[1].shape[0] == x.shape[0]:
            state, is_init = acting
        else:  # a direct call: no env to carry a state for
            acting = None
            state, is_init = self.core.initial_state(x.shape[0], self.device), torch.ones(x.shape[0], dtype=torch.bool)
        y, new_state = self.core.step(x, state, is_init.to(self.device))
        if acting is not None:
            self.streams.commit(new_state)
        extras = {k: state[k].float().cpu().numpy() for k in self.core.state_keys}
        extras["is_init"] = is_init.cpu().numpy().astype(bool)
        y_pi, y_vf = y if isinstance(y, tuple) else (y, y)
        return y_pi, y_vf, extras

    # ------------------------------------------------------------------ learning

    def update_dataset(self, data: Any) -> None:
        """Take a rollout TensorDict (batch dim = transitions) for the next ``train()``.

        Raises:
            TypeError: ``data`` is not a TensorDict.
            KeyError: required keys are missing (listed with the keys present).
            ValueError: fewer transitions than ``num_minibatches``.
        """
        from tensordict import TensorDictBase  # here, not at import: env workers acting with a copy never need it

        if not isinstance(data, TensorDictBase):
            raise TypeError(f"ppo.update_dataset needs a TensorDict, got {type(data).__name__}")
        if self.env_meta is None:
            raise RuntimeError("ppo.update_dataset called before construct_network(env_meta)")
        data = nest_dotted_keys(data)  # dict observations sampled as "obs.<key>" columns
        keys = set(data.keys())
        act_key = "raw_action" if self.kind == "continuous" and "raw_action" in keys else "action"
        if self.core is not None:
            from rlightning.policy.algorithms.recurrent_ppo import sequence_dataset

            self.dataset = sequence_dataset(self, data, act_key)
            return
        required = (*self.REQUIRED_KEYS, act_key)
        missing = [k for k in required if k not in keys]
        if missing:
            raise KeyError(
                f"ppo.update_dataset: missing keys {missing}; got {sorted(keys)} "
                "(advantage and return come from the buffer's GAE postprocess)"
            )
        n = int(data.batch_size.numel()) if len(data.batch_size) else 0
        minibatches = getattr(self.config, "num_minibatches", 1)  # subclasses (A2C) may train on the whole batch
        if n < minibatches:
            raise ValueError(f"ppo.update_dataset got {n} transitions, fewer than num_minibatches={minibatches}")
        flat = data.reshape(-1) if len(data.batch_size) > 1 else data
        ds = {k: flat.get(k).to(self.device) for k in (*self.REQUIRED_KEYS, act_key)}
        for k in ("log_prob", "value", "advantage", "return"):
            ds[k] = ds[k].reshape(n).float()
        action = ds.pop(act_key)
        ds["action"] = self.head.from_record(action, n)
        mask = action_mask(ds["obs"]) if self.kind == "discrete" else None
        if mask is not None:  # made once for every minibatch of this dataset (`masked_log_softmax`)
            ds["logit_mask"] = LogitMask.of(mask, self.head.out_dim)
        self.dataset = ds

    def _anneal_frac(self, option: str) -> float:
        """The linear schedule's factor for this ``train()`` call: 1 at the run's start, 0 at its end
        (`schedule_progress`: iterations, or the env-step budget when that ends the run first)."""
        progress = self.schedule_progress()
        if progress is None:
            if not self._anneal_warned:
                logger.warning("%s is set but set_schedule(total_iterations) was not called; no annealing", option)
                self._anneal_warned = True
            return 1.0
        return max(0.0, 1.0 - progress)

    def _current_lr(self) -> float:
        if not self.config.optim.anneal_lr:
            return self.base_lr
        return self._anneal_frac("optim.anneal_lr") * self.base_lr

    def _current_clip(self) -> float:
        """The probability ratio's clip range for this ``train()`` call (``clip_coef``, or annealed)."""
        cfg = self.config
        if not getattr(cfg, "anneal_clip", False):
            return cfg.clip_coef
        return self._anneal_frac("policy.anneal_clip") * cfg.clip_coef

    def value_clip(self, clip: float) -> float:
        """The value loss's clip range beside the ratio's current ``clip``: ``vf_clip_coef``, or ``clip``."""
        vf_clip = getattr(self.config, "vf_clip_coef", None)
        return clip if vf_clip is None else vf_clip

    def train(self) -> Dict[str, float]:
        """``update_epochs`` passes of ``num_minibatches`` clipped-objective updates.

        Returns:
            policy_loss, value_loss, entropy, approx_kl, clipfrac, explained_variance, lr (and clip_coef, the
            clip range used, with ``anneal_clip``).

        Raises:
            RuntimeError: no dataset or no optimizer yet.
        """
        if self.dataset is None:
            raise RuntimeError("ppo.train() called before update_dataset(data)")
        if "main" not in self._optimizers:
            raise RuntimeError("ppo.train() needs setup_optimizer(optim_cfg) first (train workers only)")
        cfg, ds, opt = self.config, self.dataset, self._optimizers["main"]
        lr = self._current_lr()
        for group in opt.param_groups:
            group["lr"] = lr
        self.clip_range = self._current_clip()  # read by the minibatch losses (recurrent ones too)
        params = self.get_trainable_parameters()
        n = ds["obs"].shape[0]  # transitions, or sequences with a recurrent core
        sums = {"policy_loss": 0.0, "value_loss": 0.0, "entropy": 0.0, "approx_kl": 0.0, "clipfrac": 0.0}
        steps = 0
        for _ in range(cfg.update_epochs):
            epoch_kl, epoch_steps = 0.0, 0
            for idx in torch.randperm(n, device=self.device).tensor_split(cfg.num_minibatches):
                stats = self._minibatch_update(ds, idx, opt, params)
                for k in sums:
                    sums[k] += stats[k]
                epoch_kl += stats["approx_kl"]
                epoch_steps += 1
                steps += 1
            if cfg.target_kl is not None and self.allreduce_mean(epoch_kl / epoch_steps) > cfg.target_kl:
                break
        seen = ds["mask"] if "mask" in ds else None  # sequences: the unpadded steps
        if self.encoder.normalize:
            obs = ds["obs"] if seen is None else ds["obs"][seen]
            self.encoder.update(self.allreduce_sum(self.encoder.batch_sums(obs)))
        self.update_count += steps
        self.train_calls += 1
        metrics = {k: v / steps for k, v in sums.items()}
        if seen is None:
            metrics["explained_variance"] = _explained_variance(ds["value"], ds["return"])
        else:
            metrics["explained_variance"] = _explained_variance(ds["value"][seen], ds["return"][seen])
        metrics["lr"] = lr
        if getattr(cfg, "anneal_clip", False):
            metrics["clip_coef"] = self.clip_range
        self._last_metrics = metrics
        return metrics

    def _minibatch_update(self, ds: Dict[str, torch.Tensor], idx: torch.Tensor, opt, params) -> Dict[str, float]:
        cfg, clip = self.config, self.clip_range
        if self.core is not None:
            from rlightning.policy.algorithms.recurrent_ppo import sequence_losses

            out = sequence_losses(self, ds, idx)
            self.apply_gradients(out.pop("loss"), opt, params, cfg.optim.max_grad_norm)
            return {k: float(v) for k, v in out.items()}
        obs = ds["obs"][idx]
        mask = ds["logit_mask"].rows(idx) if "logit_mask" in ds else action_mask(obs)
        new_logp, entropy, new_value = self._train_forward(self.encoder(obs), ds["action"][idx], mask)
        logratio = new_logp - ds["log_prob"][idx]
        ratio = logratio.exp()
        with torch.no_grad():
            approx_kl = ((ratio - 1) - logratio).mean()
            clipfrac = ((ratio - 1.0).abs() > clip).float().mean()
        adv = ds["advantage"][idx]
        if cfg.norm_adv and adv.numel() > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        pg_loss = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()
        ret, old_value = ds["return"][idx], ds["value"][idx]
        if cfg.clip_vloss:
            vclip = self.value_clip(clip)
            clipped = old_value + (new_value - old_value).clamp(-vclip, vclip)
            v_loss = 0.5 * torch.max((new_value - ret) ** 2, (clipped - ret) ** 2).mean()
        else:
            v_loss = 0.5 * ((new_value - ret) ** 2).mean()
        ent = entropy.mean()
        loss = pg_loss - cfg.ent_coef * ent + cfg.vf_coef * v_loss
        self.apply_gradients(loss, opt, params, cfg.optim.max_grad_norm)
        return {
            "policy_loss": pg_loss.item(),
            "value_loss": v_loss.item(),
            "entropy": ent.item(),
            "approx_kl": float(approx_kl),
            "clipfrac": float(clipfrac),
        }

    def extra_checkpoint_state(self) -> Dict[str, Any]:
        """The learning-rate schedule length."""
        return {"total_iterations": self.total_iterations or 0, "total_env_steps": self.total_env_steps or 0}

    def load_extra_checkpoint_state(self, extra: Dict[str, Any]) -> None:
        """Restore the learning-rate schedule length (a checkpoint without ``total_env_steps`` keeps the current)."""
        total = int(extra.get("total_iterations", 0) or 0)
        self.total_iterations = total or self.total_iterations
        steps = int(extra.get("total_env_steps", 0) or 0)
        self.total_env_steps = steps or self.total_env_steps


def _explained_variance(pred: torch.Tensor, target: torch.Tensor) -> float:
    var = float(target.var()) if target.numel() > 1 else 0.0
    if var == 0.0:
        return float("nan")
    return 1.0 - float((target - pred).var()) / var


def _outputs_as(obs: Any) -> Any:
    """How `PPOPolicy._act_torch` hands its outputs back: numpy arrays, or tensors on ``obs``'s device when the
    observation is a tensor (a device-resident env's)."""
    if isinstance(obs, torch.Tensor):
        device = obs.device
        return lambda t: t.to(device)
    return lambda t: t.cpu().numpy()
