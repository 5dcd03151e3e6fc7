"""The gymnasium backend (``ENVS["gymnasium"]``): any gymnasium env, vectorised.

``EnvConfig.name`` is a gymnasium id (``CartPole-v1``), or an entry point
``"package.module:Class"`` (registered with gymnasium on the fly), or
``"package.module:Env-v0"`` (the module registers the id when imported).
The id is resolved to an ``EnvSpec`` in the driver (`GymnasiumEnv.prepare`)
and the spec travels to the worker, so an env registered in a notebook cell
runs inside Ray actors.

Vectorisation (``EnvConfig.vectorization_mode``):

- ``auto``: the env's own vector implementation (its ``vector_entry_point``,
  as CartPole has) if it autoresets NEXT_STEP, else ``SyncVectorEnv``; with
  one sub-env, the env itself behind `SingleEnvVector` (same behaviour as
  ``SyncVectorEnv`` with one env, less overhead; ``vectorization_mode`` reads
  ``"single"``).
- ``vector_entry_point``: the env's own, required (ValueError if it has none
  or it does not autoreset NEXT_STEP).
- ``sync`` / ``async``: ``SyncVectorEnv`` / ``AsyncVectorEnv`` (subprocesses).

Seeding: ``reset(seed)`` seeds sub-env ``j`` with ``seed + j`` (gymnasium's
rule); the group seeds worker ``i`` with ``seed`` plus the number of
sub-environments of the workers before it, so every sub-env of a run has its
own seed and a run is reproducible.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any, Callable, Dict, Optional

import gymnasium as gym
import numpy as np
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from rlightning.env.base_env import BaseEnv
from rlightning.env.errors import caller_error
from rlightning.env.suites import check_suite_installed, ensure_suite
from rlightning.env.utils.single import SingleEnvVector
from rlightning.env.utils.spaces import make_action_check
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.env.wrappers import VECTOR_REWARD_WRAPPERS, RawRewardTap, apply_wrappers, resolve_wrappers
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import ENVS, closest

logger = get_logger(__name__)

_F32 = np.dtype(np.float32)
_BOOL = np.dtype(bool)


def _unknown_env_error(name: str, detail: str = "") -> KeyError:
    candidates = list(gym.registry.keys()) + [n for n in ENVS.names() if n != "gymnasium"]
    near = closest(str(name), candidates, n=5)
    hint = f" Closest registered names: {', '.join(repr(n) for n in near)}." if near else ""
    extra = f" ({detail})" if detail else ""
    return KeyError(
        f"unknown env id {name!r}{extra}.{hint} Use a gymnasium id (see gymnasium.registry), a 'module:Class' "
        f"entry point, or a BaseEnv registered in ENVS ({', '.join(ENVS.names()) or 'none'})"
    )


def resolve_env_spec(name: str) -> EnvSpec:
    """Find the gymnasium ``EnvSpec`` for ``name``, registering a ``module:Class`` entry point.

    Raises:
        KeyError: no such id or entry point; the message lists the closest registered names
            from gymnasium's registry and ``ENVS``.
        MissingSuiteError: an env of a suite (Atari, MinAtar, MiniGrid, MuJoCo, Box2D) whose package is
            not installed; the message names the extra to install.
    """
    if not isinstance(name, str) or not name:
        raise KeyError(f"env id must be a non-empty string, got {name!r}")
    ensure_suite(name)
    if name in gym.registry:
        spec = gym.spec(name)
        check_suite_installed(spec)
        return spec
    if ":" not in name:
        raise _unknown_env_error(name)
    module_name, attr = name.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise _unknown_env_error(name, f"module {module_name!r} cannot be imported: {err}") from None
    if attr in gym.registry:  # "module:Env-v0": importing the module registered the id
        return gym.spec(attr)
    obj = getattr(module, attr, None)
    if obj is None or not callable(obj):
        raise _unknown_env_error(name, f"module {module_name!r} has no env class or id {attr!r}")
    env_name = name.replace(":", ".")
    if env_name not in gym.registry or gym.registry[env_name].entry_point is not obj:
        gym.register(id=env_name, entry_point=obj)
    return gym.spec(env_name)


@ENVS.register("gymnasium")
class GymnasiumEnv(BaseEnv):
    """A gymnasium env with ``num_envs`` sub-environments behind gymnasium's vector API.

    Args:
        config: Env config: ``name``, ``env_kwargs``, ``num_envs``, ``max_episode_steps``,
            ``vectorization_mode``, ``out_of_bounds_action``.
        worker_index: Global worker index (makes ``env_id`` unique).
        preprocess_fn: `PolicyResponse` -> batched action.
        env_spec: The resolved spec (given by the group from `prepare`); None resolves ``config.name`` here.

    Raises:
        KeyError: unknown env id (closest names listed).
        ValueError: ``vectorization_mode="vector_entry_point"`` for an env without a usable one.
    """

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
        env_spec: Optional[EnvSpec] = None,
    ) -> None:
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        spec = env_spec if env_spec is not None else resolve_env_spec(config.name)
        self.env_spec = spec
        self.env = self._make_vector_env(spec)
        self.vectorization_mode = self._mode
        self.single_observation_space = self.env.single_observation_space
        self.single_action_space = self.env.single_action_space
        obs_space = self.single_observation_space
        self._obs_dtype = obs_space.dtype if isinstance(obs_space, gym.spaces.Box) else None
        self._check_action = make_action_check(
            self.single_action_space, self.num_envs, self.env_id, config.out_of_bounds_action
        )
        self._needs_reset = True

    @classmethod
    def prepare(cls, config: EnvConfig) -> Dict[str, Any]:
        """Resolve ``config.name`` to an ``EnvSpec`` in the driver; the spec is shipped to the workers."""
        return {"env_spec": resolve_env_spec(config.name)}

    def _make_vector_env(self, spec: EnvSpec) -> gym.vector.VectorEnv:
        """The vector env of the sub-envs with their wrappers, then the reward wrappers over the vector.

        ``normalize_reward`` and ``clip_reward`` run over the vector env (gymnasium's vector versions), behind
        a tap that keeps the env's own reward: episode returns (metrics, evaluation) count that reward, as
        CleanRL's and Stable-Baselines3's episode monitors do, while the learner gets the transformed one.
        """
        specs = resolve_wrappers(self.config.wrappers)
        per_env = [w for w in specs if w.cls not in VECTOR_REWARD_WRAPPERS]
        reward = [w for w in specs if w.cls in VECTOR_REWARD_WRAPPERS]
        env = self._make_inner_vector_env(spec, per_env)
        self._raw_reward: Optional[RawRewardTap] = None
        if reward:
            env = self._raw_reward = RawRewardTap(env)
            for w in reward:
                env = VECTOR_REWARD_WRAPPERS[w.cls](env, **w.kwargs)
        return env

    def _make_inner_vector_env(self, spec: EnvSpec, wrappers: list) -> gym.vector.VectorEnv:
        cfg = self.config
        kwargs = dict(cfg.env_kwargs)
        if cfg.max_episode_steps is not None:
            kwargs["max_episode_steps"] = cfg.max_episode_steps
        mode = cfg.vectorization_mode
        if mode == "auto" and self.num_envs == 1:
            self._mode = "single"
            return SingleEnvVector(apply_wrappers(gym.make(spec, **kwargs), wrappers))
        if mode == "vector_entry_point" and wrappers:
            raise ValueError(
                f"env {self.env_id}: env.wrappers other than normalize_reward and clip_reward wrap each sub-env, "
                "which vectorization_mode='vector_entry_point' does not have; use 'auto', 'sync' or 'async'"
            )
        if mode == "auto":
            has_own = spec.vector_entry_point is not None and not wrappers
            mode = "vector_entry_point" if has_own else "sync"
            if mode == "vector_entry_point":
                env = gym.make_vec(spec, num_envs=self.num_envs, vectorization_mode=mode, **kwargs)
                if env.metadata.get("autoreset_mode") == AutoresetMode.NEXT_STEP:
                    self._mode = mode
                    return env
                logger.info("%s: its vector env does not autoreset NEXT_STEP; using sync", self.env_id)
                env.close()
                mode = "sync"
        elif mode == "vector_entry_point":
            if spec.vector_entry_point is None:
                raise ValueError(
                    f"env {self.env_id}: vectorization_mode='vector_entry_point' but {spec.id!r} has no vector "
                    "entry point; use 'auto', 'sync' or 'async'"
                )
            env = gym.make_vec(spec, num_envs=self.num_envs, vectorization_mode=mode, **kwargs)
            autoreset = env.metadata.get("autoreset_mode")
            if autoreset != AutoresetMode.NEXT_STEP:
                env.close()
                raise ValueError(
                    f"env {self.env_id}: the vector env of {spec.id!r} autoresets {autoreset!r}, rlightning needs "
                    "NEXT_STEP; use vectorization_mode 'auto', 'sync' or 'async'"
                )
            self._mode = mode
            return env
        self._mode = mode
        return gym.make_vec(
            spec,
            num_envs=self.num_envs,
            vectorization_mode=mode,
            vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP},
            wrappers=[functools.partial(apply_wrappers, specs=wrappers)],  # and Tuple observations as dicts
            **kwargs,
        )

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> EnvRet:
        """Reset every sub-environment (sub-env ``j`` seeded with ``seed + j``)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise caller_error(ValueError(f"env {self.env_id}: seed must be None or an int >= 0, got {seed!r}"))
        obs, info = self.env.reset(seed=None if seed is None else int(seed), options=options)
        ep_return, ep_length = self.episodes.reset()
        self._needs_reset = False
        info = dict(info) if info else {}
        info["episode_return"] = ep_return
        info["episode_length"] = ep_length
        n = self.num_envs
        return EnvRet(
            env_id=self.env_id,
            observation=self._cast_obs(obs),
            last_reward=np.zeros(n, dtype=np.float32),
            last_terminated=np.zeros(n, dtype=bool),
            last_truncated=np.zeros(n, dtype=bool),
            info=info,
        )

    def step(self, policy_resp: PolicyResponse) -> EnvRet:
        """Step every sub-environment with the response's batched action.

        The input checks (and ``preprocess_fn``) raise errors marked as the caller's; whatever the
        gymnasium env itself raises is an env error (the group recreates this worker).

        Raises:
            ValueError: the action is outside the action space (env id, value and space named),
                the response answers another env, or the env was never reset.
        """
        if type(policy_resp) is not PolicyResponse or policy_resp.env_id not in (None, self.env_id):
            self.check_policy_resp(policy_resp)  # raises
        if self._needs_reset:
            raise caller_error(ValueError(f"env {self.env_id}: step() before reset(); call reset() first"))
        try:
            action = getattr(policy_resp, "action", None)
            if type(action) is np.ndarray and self.preprocess_fn is default_env_preprocess_fn:
                action = self._check_action(action)  # the array the default would return
            else:
                action = self._check_action(self.preprocess_fn(policy_resp))
        except Exception as err:  # noqa: BLE001 - a bad action or preprocess_fn is the caller's bug
            caller_error(err)
            raise
        obs, reward, terminated, truncated, info = self.env.step(action)
        # Conversions only where the vector env did not already give the contract's dtypes.
        if type(reward) is not np.ndarray or reward.dtype != _F32:
            reward = np.asarray(reward, dtype=np.float32)
        if type(terminated) is not np.ndarray or terminated.dtype != _BOOL:
            terminated = np.asarray(terminated, dtype=bool)
        if type(truncated) is not np.ndarray or truncated.dtype != _BOOL:
            truncated = np.asarray(truncated, dtype=bool)
        raw = self._raw_reward
        ep_return, ep_length = self.episodes.update(reward if raw is None else raw.last_reward, terminated | truncated)
        info = dict(info) if info else {}
        info["episode_return"] = ep_return
        info["episode_length"] = ep_length
        if self._obs_dtype is not None and type(obs) is np.ndarray and obs.dtype != self._obs_dtype:
            obs = obs.astype(self._obs_dtype)
        return EnvRet(self.env_id, obs, reward, terminated, truncated, info)

    def recreate_env(self, seed: Optional[int] = None) -> EnvRet:
        """Build the vector env again after its code raised, in this worker, and reset it.

        The group calls this instead of building a new worker (a Ray actor keeps its process and its
        policy copy). The old vector env is closed if it can be; every sub-env's episode in flight is gone.

        Returns:
            The reset `EnvRet` of the new sub-environments.
        """
        old, self.env = self.env, None
        if old is not None:
            try:
                old.close()
            except Exception as err:  # noqa: BLE001 - a broken env need not close cleanly
                logger.debug("%s: closing the vector env that raised failed: %r", self.env_id, err)
        self.env = self._make_vector_env(self.env_spec)
        self._needs_reset = True
        return self.reset(seed=seed)

    def _cast_obs(self, obs: Any) -> Any:
        if self._obs_dtype is not None and isinstance(obs, np.ndarray) and obs.dtype != self._obs_dtype:
            return obs.astype(self._obs_dtype)
        return obs

    def get_metadata(self) -> EnvMeta:
        """Env id, the spaces of one sub-environment and ``num_envs``."""
        return EnvMeta(
            env_id=self.env_id,
            action_space=self.single_action_space,
            observation_space=self.single_observation_space,
            num_envs=self.num_envs,
        )

    def close(self) -> None:
        """Close the vector env."""
        env = getattr(self, "env", None)
        if env is not None:
            env.close()
            self.env = None
