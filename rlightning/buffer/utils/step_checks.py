"""Checks of incoming steps: observations against the env's space, step dicts against the first one, NaNs."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from rlightning.buffer.utils.preprocessors import shapes_str, space_spec, to_numpy
from rlightning.types import EnvMeta, EnvRet
from rlightning.utils.logger import get_logger

__all__ = ["StepChecker"]

logger = get_logger("rlightning.buffer.utils.storage")

Spec = Tuple[Tuple[int, ...], np.dtype]


class StepChecker:
    """Validates what a `Storage` is given before anything is written.

    Args:
        env_meta_list: Env metadata; observation spaces give the expected observations.
        nan_guard: ``raise``, ``drop`` or ``warn`` on NaN or inf in observations and rewards.
    """

    def __init__(self, env_meta_list: Sequence[EnvMeta], nan_guard: str = "raise") -> None:
        self.nan_guard = nan_guard
        self.metas: Dict[str, EnvMeta] = {}
        self.common_obs_spec: Optional[Spec] = None
        self.seen_obs_spec: Dict[str, Spec] = {}
        self.step_spec: Optional[Dict[str, Spec]] = None
        self.set_env_metas(env_meta_list)

    def set_env_metas(self, env_meta_list: Sequence[EnvMeta]) -> None:
        """Register env metadata (observation spaces are used to check observations)."""
        for meta in env_meta_list:
            if not isinstance(meta, EnvMeta):
                raise TypeError(f"env_meta_list entries must be EnvMeta, got {type(meta).__name__}")
            if meta.env_id is not None:
                self.metas[str(meta.env_id)] = meta
        specs = {space_spec(m.observation_space) for m in env_meta_list if m.observation_space is not None}
        if len(specs) == 1:
            self.common_obs_spec = specs.pop()

    def obs_spec(self, env_id: str, tracked_num_envs: Optional[int] = None) -> Tuple[Optional[Spec], Optional[int]]:
        """(per-env observation shape and dtype, num_envs) expected from ``env_id``; None where unknown."""
        meta = self.metas.get(env_id)
        spec = None
        num_envs = None
        if meta is not None:
            num_envs = meta.num_envs
            if meta.observation_space is not None:
                spec = space_spec(meta.observation_space)
        if spec is None:
            spec = self.common_obs_spec or self.seen_obs_spec.get(env_id)
        if tracked_num_envs is not None:
            num_envs = tracked_num_envs
        return spec, num_envs

    def check_obs(self, env_ret: EnvRet, tracked_num_envs: Optional[int] = None) -> Tuple[np.ndarray, bool]:
        """The EnvRet's observation as a batch ``[num_envs, ...]``, checked against the env's space.

        Returns:
            (the batch, single): ``single`` when it was one unbatched env's observation (given a leading 1).

        Raises:
            TypeError: an observation that is not an array of numbers (None, a string, a dict, objects).
            ValueError: shape, dtype or number of sub-environments differ (naming the env, expected and got).
        """
        env_id = env_ret.env_id
        raw = env_ret.observation
        if raw is None or isinstance(raw, (str, bytes, dict)):
            kind = "a dict observation needs add_rollout records" if isinstance(raw, dict) else "an array"
            raise TypeError(
                f"env {env_id!r}: env_ret.observation must be an array of numbers ({kind}), got {type(raw).__name__}"
            )
        try:
            obs = to_numpy(raw)
        except (TypeError, ValueError) as err:
            raise TypeError(f"env {env_id!r}: env_ret.observation is not array-like ({type(raw).__name__})") from err
        if obs.dtype.kind not in "biuf":
            raise TypeError(
                f"env {env_id!r}: env_ret.observation must hold real numbers or booleans, got dtype {obs.dtype}"
            )
        spec, num_envs = self.obs_spec(env_id, tracked_num_envs)
        if spec is None:
            if obs.ndim == 0:
                self.seen_obs_spec.setdefault(env_id, ((), obs.dtype))
                return obs.reshape(1), True
            self.seen_obs_spec.setdefault(env_id, (tuple(obs.shape[1:]), obs.dtype))
            return obs, False
        shape, dtype = spec
        single = False
        if obs.shape == shape and num_envs in (None, 1):
            obs = obs[None]
            single = True
        n = obs.shape[0] if obs.ndim else 0
        bad_n = num_envs is not None and n != num_envs
        if obs.ndim == 0 or tuple(obs.shape[1:]) != shape or obs.dtype != dtype or bad_n:
            want_n = num_envs if num_envs is not None else "num_envs"
            raise ValueError(
                f"env {env_id!r}: observation has shape {shapes_str(obs.shape)} and dtype {obs.dtype}, "
                f"expected shape ({want_n}, {', '.join(map(str, shape))}) and dtype {dtype} "
                "([num_envs, *observation_space.shape], or the space's own shape for a single env)"
            )
        return obs, single

    def check_step(
        self, env_id: str, step: Mapping[str, Any], num_envs: int, single: bool = False
    ) -> Dict[str, np.ndarray]:
        """Check a step dict against the first one seen (keys, per-row shapes); cast same-kind dtypes.

        With ``single`` (one unbatched env) a value without the leading 1 (a scalar action, an
        action of the action space's own shape) gets one.

        Raises:
            KeyError: a required key is missing.
            ValueError: keys, shapes or dtypes differ from the stored ones.
        """
        out: Dict[str, np.ndarray] = {}
        for k, v in step.items():
            try:
                arr = to_numpy(v)
            except (TypeError, ValueError) as err:
                raise TypeError(f"env {env_id!r}: step key {k!r} is not array-like ({type(v).__name__})") from err
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"env {env_id!r}: step key {k!r} must hold real numbers, got dtype {arr.dtype}")
            if single and (arr.ndim == 0 or arr.shape[0] != 1 or self._unbatched(k, arr)):
                arr = arr[None]
            if arr.ndim == 0 or arr.shape[0] != num_envs:
                raise ValueError(
                    f"env {env_id!r}: step key {k!r} has shape {shapes_str(arr.shape)}, "
                    f"expected a leading dimension of num_envs={num_envs}"
                )
            out[k] = arr
        for k in ("obs", "reward", "terminated", "truncated", "action"):
            if k not in out:
                raise KeyError(f"env {env_id!r}: the step dict has no {k!r} key (it has {sorted(out)})")
        if self.step_spec is None:
            self.step_spec = {k: (tuple(v.shape[1:]), v.dtype) for k, v in out.items()}
            return out
        if out.keys() != self.step_spec.keys():
            missing = sorted(set(self.step_spec) - set(out))
            extra = sorted(set(out) - set(self.step_spec))
            raise ValueError(
                f"env {env_id!r}: step keys differ from the stored ones: missing {missing}, unexpected {extra}"
            )
        for k, arr in out.items():
            shape, dtype = self.step_spec[k]
            if tuple(arr.shape[1:]) != shape:
                raise ValueError(
                    f"env {env_id!r}: {k!r} has shape {shapes_str(arr.shape)}, "
                    f"expected ({num_envs}, {', '.join(map(str, shape))})"
                )
            if arr.dtype != dtype:
                if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
                    raise ValueError(f"env {env_id!r}: {k!r} has dtype {arr.dtype}, expected {dtype}")
                out[k] = arr.astype(dtype)
        return out

    def _unbatched(self, key: str, arr: np.ndarray) -> bool:
        """A single env's value of the per-row shape already seen (e.g. an action of shape (1,) for Box(1,))."""
        if self.step_spec is None or key not in self.step_spec:
            return False
        return tuple(arr.shape) == self.step_spec[key][0] and tuple(arr.shape[1:]) != self.step_spec[key][0]

    def nan_rows(self, env_id: str, step: Dict[str, np.ndarray]) -> Optional[np.ndarray]:
        """Rows with a NaN or inf in ``obs`` or ``reward``, handled as ``nan_guard`` says.

        Returns:
            The rows to drop (``nan_guard="drop"``), else None.

        Raises:
            ValueError: non-finite values with ``nan_guard="raise"``.
        """
        bad = None
        where = []
        for key in ("obs", "reward"):
            arr = step[key]
            if arr.dtype.kind != "f" or np.isfinite(arr).all():
                continue
            rows = ~np.isfinite(arr.reshape(arr.shape[0], -1)).all(axis=1)
            if rows.any():
                where.append(f"{key!r} at rows {np.flatnonzero(rows).tolist()}")
                bad = rows if bad is None else bad | rows
        if bad is None:
            return None
        msg = f"env {env_id!r}: non-finite values in {' and '.join(where)}"
        if self.nan_guard == "raise":
            raise ValueError(f"{msg}; nothing was stored for this step (nan_guard='raise'; 'drop' or 'warn' go on)")
        if self.nan_guard == "drop":
            logger.warning("%s; dropping those sub-environments' episodes in progress", msg)
            return bad
        logger.warning("%s; storing them anyway (nan_guard='warn')", msg)
        return None
