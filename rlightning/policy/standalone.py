"""`StandalonePolicy`: a trained policy outside the engine: ``predict`` on raw gymnasium observations, no Ray.

Usage::

    pi = run.policy()                              # or rlightning.load_policy("runs/x/checkpoints/iter_000100")
    obs, _ = env.reset()
    action, state = pi.predict(obs)                # one observation -> one action (state: None, or the recurrent state)
    actions, _ = pi.predict(batch_of_obs)          # [B, ...] -> [B, ...]
    pi.export("policy.onnx")                       # see `rlightning.policy.export`

It holds an eval-role copy of the run's policy (its own networks, weights copied in) and the env's spaces.
Observations go in as the env gives them (a Box array, a Discrete int, a dict for a Dict space, ``uint8``
frames for pixels), one or a batch; actions come out in the action space's format. Deterministic actions
run `ActingNet` (what an export writes, so the two agree); sampled ones the policy's own acting.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
import torch
from gymnasium import spaces

from rlightning.policy.acting_net import ActingNet
from rlightning.policy.algorithms.networks import categorical_draw
from rlightning.types import EnvMeta
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["CHECKPOINT_FILES", "StandalonePolicy", "load_policy"]

#: The files a checkpoint folder needs for `load_policy`.
CHECKPOINT_FILES = ("engine.json", "config.yaml", "policy.pt")

State = Optional[Dict[str, np.ndarray]]


class StandalonePolicy:
    """A policy that acts on raw observations in this process (no Ray, no Lab).

    Args:
        policy: A built eval-role `BasePolicy` holding the weights to act with (owned by this object).
        config: The run's `MainConfig` (kept for reference: env id, wrappers), or None.

    Raises:
        ValueError: a policy class or observation space it cannot act for.
    """

    def __init__(self, policy: Any, config: Any = None) -> None:
        if policy.env_meta is None:
            raise ValueError(f"{type(policy).__name__} has no networks yet; build it with construct_network(env_meta)")
        self.policy = policy
        self.config = config
        self.observation_space = policy.env_meta.observation_space
        self.action_space = policy.env_meta.action_space
        for module in policy.modules.values():
            module.eval()
        self.net = ActingNet(policy, masked=False)
        self._masked_net: Optional[ActingNet] = None

    # ------------------------------------------------------------------ building
    @classmethod
    def from_weights(
        cls, config: Any, env_meta: EnvMeta, weights: Dict[str, Any], weight_version: int = 0
    ) -> StandalonePolicy:
        """A standalone copy of ``config.policy`` for ``env_meta``'s spaces with ``weights`` (name -> array).

        Raises:
            KeyError, ValueError: weights that do not fit the networks (`BasePolicy.load_state_dict`).
        """
        policy = _build_policy(config, env_meta)
        policy.load_state_dict(weights, weight_version)
        return cls(policy, config)

    @classmethod
    def from_run(cls, run: Any) -> StandalonePolicy:
        """The current weights of a `rlightning.notebook.Run` (its train workers'), in a copy of its own."""
        meta = run.env_group.env_metas[0]
        return cls.from_weights(run.config, meta, run.policy_group.get_weights(), run.policy_group.weight_version)

    # ------------------------------------------------------------------ acting
    @property
    def recurrent(self) -> bool:
        """True when actions depend on a recurrent state (``predict`` takes and returns it)."""
        return bool(self.net.state_keys)

    def initial_state(self, batch: int = 1) -> Dict[str, np.ndarray]:
        """The zero state of ``batch`` rows (what a new episode starts from; None in `predict` means this).

        Raises:
            ValueError: a feed-forward policy (it has no state).
        """
        if not self.recurrent:
            raise ValueError("this policy is feed-forward: it has no recurrent state")
        return {k: v.numpy() for k, v in self.policy.core.initial_state(batch, torch.device("cpu")).items()}

    def predict(
        self,
        obs: Any,
        state: State = None,
        deterministic: bool = True,
        action_mask: Any = None,
        episode_start: Any = None,
    ) -> Tuple[Any, State]:
        """Actions for a raw observation (or a batch of them), as Stable-Baselines3's ``predict`` answers.

        Args:
            obs: One observation as the env gives it, or a batch with a leading dim (a dict of them for a
                Dict space).
            state: A recurrent policy's state from the previous call (None: a new episode); feed-forward: None.
            deterministic: The most likely action (True) or a sample of the policy's distribution.
            action_mask: Bool array ``[n]`` (``[B, n]`` for a batch), True = allowed; Discrete and
                MultiDiscrete actions (``n``: the choices, all entries' concatenated for a MultiDiscrete). A row
                allowing nothing acts unmasked, and a Dict observation's own ``action_mask`` key applies too, as
                in the policy's acting (`rlightning.policy.networks.masks`).
            episode_start: Bool ``[B]`` (or one bool): rows whose state restarts from zero (a recurrent policy).

        Returns:
            ``(action, state)``: the action(s) in the action space's format, and the state after this step
            (None for a feed-forward policy).

        Raises:
            ValueError: an observation, mask or state of the wrong shape (expected and got named), a state for a
                feed-forward policy, a sampled masked action of a policy without a categorical distribution.
            KeyError: a Dict observation without one of the space's keys.
        """
        batch, single = self._obs_batch(obs)
        rows = _rows(batch)
        mask = self._mask_batch(action_mask, rows, single) if action_mask is not None else None
        state_in = self._state_batch(state, rows, single, episode_start)
        inputs = [*(_tensors(batch, self.net.obs_keys)), *([torch.as_tensor(mask)] if mask is not None else [])]
        inputs += [torch.as_tensor(state_in[k]) for k in self.net.state_keys]
        with torch.no_grad():
            if deterministic:
                net = self._net_for(mask is not None)
                out = net(*inputs)
                action_t, new_state = (out[0], out[1:]) if self.recurrent else (out, ())
                action = action_t.numpy()
                new_state = {k: v.numpy() for k, v in zip(self.net.state_keys, new_state)}
            elif mask is None and not self.recurrent:
                action = self.policy.compute_actions(batch, deterministic=False)["action"]
                new_state = {}
            else:
                action, new_state = self._sample(inputs, mask is not None)
        action = _as_space_dtype(action, self.action_space)
        out_state = None
        if self.recurrent:
            out_state = {k: (v[0] if single else v) for k, v in new_state.items()}
        return (action[0] if single else action), out_state

    def _net_for(self, masked: bool) -> ActingNet:
        if not masked:
            return self.net
        if self._masked_net is None:
            self._masked_net = ActingNet(self.policy, masked=True)
        return self._masked_net

    def _sample(self, inputs: list, masked: bool) -> Tuple[np.ndarray, Dict[str, np.ndarray]]:
        """A sampled action through the actor-critic head's own distribution (a mask or a recurrent state)."""
        net = self._net_for(masked)
        if net.family != "actor_critic":
            raise ValueError(
                f"deterministic=False with an action mask or a recurrent state needs a policy with a categorical "
                f"or Gaussian head (ppo, a2c, impala, appo); {type(self.policy).__name__} acts deterministically here"
            )
        obs, mask, state = net.split_inputs(tuple(inputs))
        x, new_state = net.features(obs, state)
        head = self.policy.head
        if head.kind == "discrete":
            sample = categorical_draw(torch.log_softmax(net.scores(x, mask), dim=-1))
        else:  # the head's own distribution (a mask for MultiDiscrete; a Gaussian's Normal)
            sample = head.distribution(net.actor(x), mask).sample()
        return head.to_env(sample), {k: v.numpy() for k, v in new_state.items()}

    # ------------------------------------------------------------------ input checks
    def _obs_batch(self, obs: Any) -> Tuple[Any, bool]:
        """``obs`` with a leading batch dim (arrays in the space's dtype) and whether it was one observation."""
        space = self.observation_space
        if isinstance(space, spaces.Dict):
            if not isinstance(obs, dict):
                raise ValueError(f"the observation space is a Dict {space}; got a {type(obs).__name__}, not a dict")
            missing = [k for k in space.spaces if k not in obs]
            if missing:
                raise KeyError(f"observation is missing keys {missing} of the Dict space (got {sorted(obs)})")
            parts = {k: _one_or_batch(obs[k], sub, f"observation[{k!r}]") for k, sub in space.spaces.items()}
            singles = {single for _, single in parts.values()}
            if len(singles) > 1:
                raise ValueError("observation entries mix one observation and a batch; give all of them one way")
            return {k: arr for k, (arr, _) in parts.items()}, singles.pop()
        return _one_or_batch(obs, space, "observation")

    def _mask_batch(self, action_mask: Any, rows: int, single: bool) -> np.ndarray:
        space = self.action_space
        if isinstance(space, spaces.Discrete):
            n = int(space.n)
        elif isinstance(space, spaces.MultiDiscrete):
            n = int(np.sum(space.nvec))
        else:
            raise ValueError(f"action_mask masks Discrete and MultiDiscrete actions; the action space is {space}")
        mask = np.asarray(action_mask)
        want = (n,) if single else (rows, n)
        if mask.shape != want:
            raise ValueError(f"action_mask has shape {mask.shape}, expected {want} (True = allowed) for {space}")
        if mask.dtype != np.bool_:
            if mask.dtype.kind not in "iub":
                raise ValueError(f"action_mask must be bool (True = allowed), got dtype {mask.dtype}")
            mask = mask.astype(bool)
        return mask.reshape(rows, n)

    def _state_batch(self, state: State, rows: int, single: bool, episode_start: Any) -> Dict[str, np.ndarray]:
        if not self.recurrent:
            if state is not None:
                raise ValueError("state given to a feed-forward policy; it has no recurrent state (pass None)")
            return {}
        if state is None:
            return self.initial_state(rows)
        if not isinstance(state, dict):
            raise ValueError(
                f"state must be the dict predict returned (keys {list(self.net.state_keys)}), got {state!r}"
            )
        missing = [k for k in self.net.state_keys if k not in state]
        if missing:
            raise KeyError(f"state is missing {missing}; predict returns keys {list(self.net.state_keys)}")
        width = self.initial_state(1)[self.net.state_keys[0]].shape[1]
        out = {}
        for k in self.net.state_keys:
            arr = np.asarray(state[k], dtype=np.float32)
            want = (width,) if single else (rows, width)
            if arr.shape != want:
                raise ValueError(f"state[{k!r}] has shape {arr.shape}, expected {want}")
            out[k] = arr.reshape(rows, width)
        if episode_start is not None:
            start = np.asarray(episode_start, dtype=bool)
            start = np.full(rows, bool(start)) if start.ndim == 0 else start.reshape(-1)
            if start.shape != (rows,):
                raise ValueError(f"episode_start has {start.shape[0]} rows, the observations {rows}")
            out = {k: v * (~start)[:, None].astype(np.float32) for k, v in out.items()}
        return out

    # ------------------------------------------------------------------ export
    def export(self, path: Union[str, Path], format: str = "onnx", action_mask: bool = False) -> Path:
        """Write the deterministic policy as ONNX or TorchScript (see `rlightning.policy.export.export_policy`)."""
        from rlightning.policy.export import export_policy

        return export_policy(self, path, format=format, action_mask=action_mask)

    def __repr__(self) -> str:
        kind = "recurrent" if self.recurrent else "feed-forward"
        name = type(self.policy).__name__
        return f"StandalonePolicy({name}, {kind}, obs {self.observation_space}, actions {self.action_space})"


# ---------------------------------------------------------------------- helpers


def _one_or_batch(obs: Any, space: Any, name: str) -> Tuple[np.ndarray, bool]:
    """``obs`` as ``[B, *shape]`` in the space's dtype, and whether it was one observation."""
    shape = tuple(space.shape) if isinstance(space, (spaces.Box, spaces.MultiDiscrete, spaces.MultiBinary)) else ()
    if not isinstance(space, (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)):
        raise ValueError(f"{name}: a standalone policy takes Box, Discrete, MultiDiscrete, MultiBinary or Dict spaces")
    arr = np.asarray(obs)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric for {space}, got {type(obs).__name__} of dtype {arr.dtype}")
    if arr.shape == shape:
        single, arr = True, arr.reshape((1, *shape))
    elif arr.ndim == len(shape) + 1 and tuple(arr.shape[1:]) == shape and arr.shape[0] > 0:
        single = False
    else:
        batch = f"(B, {', '.join(map(str, shape))})" if shape else "(B,)"
        raise ValueError(
            f"{name} has shape {arr.shape}, expected {shape} (one observation) or {batch} (a batch) for {space}"
        )
    return np.ascontiguousarray(arr, dtype=space.dtype), single


def _rows(batch: Any) -> int:
    return int(next(iter(batch.values())).shape[0]) if isinstance(batch, dict) else int(batch.shape[0])


def _tensors(batch: Any, keys: Optional[list]) -> list:
    if keys is None:
        return [torch.as_tensor(batch)]
    return [torch.as_tensor(batch[k]) for k in keys]


def _as_space_dtype(action: np.ndarray, space: Any) -> np.ndarray:
    dtype = getattr(space, "dtype", None)
    return action.astype(dtype, copy=False) if dtype is not None else action


def _build_policy(config: Any, env_meta: EnvMeta) -> Any:
    """An eval-role policy of ``config.policy`` with networks for ``env_meta`` (weights not loaded yet)."""
    from rlightning.policy.base_policy import PolicyRole
    from rlightning.policy.builder import resolve_policy_class

    policy_cfg = config.policy.model_copy(deep=True)
    policy_cfg.checkpoint = None  # the weights come from the caller, not from a file named in the config
    policy = resolve_policy_class(policy_cfg.type)(policy_cfg, role_type=PolicyRole.EVAL)
    policy.np_rng = np.random.default_rng(config.seed)
    policy.construct_network(env_meta)
    if policy.env_meta is None:
        policy.env_meta = env_meta
    policy.set_deterministic(True)
    return policy


def _env_meta(config: Any) -> EnvMeta:
    """The spaces of one sub-env of ``config.env`` (built once and closed; no Ray)."""
    from rlightning.env.worker_slot import resolve_env_class

    env_cfg = config.env.model_copy(update={"num_envs": 1, "vectorization_mode": "auto"})
    env_cls = resolve_env_class(env_cfg)
    env = env_cls(env_cfg, worker_index=0, **dict(env_cls.prepare(env_cfg) or {}))
    try:
        meta = env.get_metadata()
    finally:
        env.close()
    return meta


def check_checkpoint_folder(path: Union[str, Path]) -> Path:
    """``path`` as a checkpoint folder with every file `load_policy` reads, else a clear error.

    Raises:
        FileNotFoundError: no folder at ``path``.
        ValueError: an incomplete folder (a file missing, or shorter than ``engine.json`` records).
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint folder {str(folder)!r} does not exist (or is not a folder)")
    missing = [name for name in CHECKPOINT_FILES if not (folder / name).is_file()]
    if missing:
        raise ValueError(
            f"checkpoint folder {str(folder)!r} is incomplete: missing {', '.join(missing)}; a checkpoint holds "
            f"{', '.join(CHECKPOINT_FILES)} (written by run.save() or train.checkpoint_interval)"
        )
    try:
        engine = json.loads((folder / "engine.json").read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(
            f"checkpoint folder {str(folder)!r} is incomplete: engine.json is not valid JSON ({err})"
        ) from None
    files = engine.get("files") if isinstance(engine, dict) else None
    for name, size in (files or {}).items():
        file = folder / name
        if not file.is_file() or file.stat().st_size != size:
            raise ValueError(
                f"checkpoint folder {str(folder)!r} is incomplete: {name} should hold {size} bytes "
                f"({'missing' if not file.is_file() else f'has {file.stat().st_size}'})"
            )
    return folder


def load_policy(checkpoint_dir: Union[str, Path]) -> StandalonePolicy:
    """The `StandalonePolicy` of a checkpoint folder (``runs/<name>/checkpoints/iter_000100``), without Ray.

    The env of the checkpoint's config is built once (one sub-env, closed again) for its spaces.

    Raises:
        FileNotFoundError: no folder there.
        ValueError: an incomplete folder (the missing files named), or a config that does not validate.
        KeyError: weights that do not fit the networks the config builds.
    """
    import yaml

    from rlightning.policy.checkpoint import read_checkpoint
    from rlightning.utils.config import config_from_dict

    folder = check_checkpoint_folder(checkpoint_dir)
    try:
        raw = yaml.safe_load((folder / "config.yaml").read_text())
    except yaml.YAMLError as err:
        raise ValueError(f"checkpoint {str(folder)!r}: config.yaml is not valid YAML: {err}") from None
    config = config_from_dict(raw, source=f"in checkpoint {folder}/config.yaml", legacy=True)
    state = read_checkpoint(folder / "policy.pt")
    policy = _build_policy(config, _env_meta(config))
    policy.load_checkpoint_state(state)
    logger.info("loaded %s policy from %s (weight version %d)", config.policy.type, folder, policy.weight_version)
    return StandalonePolicy(policy, config)
