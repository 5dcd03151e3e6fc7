"""The gymnax backend (``ENVS["gymnax"]``): JAX envs whose state stays on their device, batches in torch via DLPack.

``env.backend: gymnax`` with ``env.name`` a gymnax id (``CartPole-v1``, ``Acrobot-v1``, ...) runs
``num_envs`` copies of the env as one jitted, vmapped JAX function. Observations, rewards, done flags and
episode totals reach torch with ``torch.from_dlpack`` (no host copy), and the policy's actions go back to JAX
the same way; nothing on the path is a numpy array. The env, the policy copy acting on it and the rollout
record (`rlightning.env.utils.tensor_record_writer`) stay on the env's device: JAX's default device (CPU here;
a GPU where jax has CUDA)::

    cfg = apply_overrides(load_preset("cartpole_ppo_fast"), ["env.backend=gymnax", "env.num_envs=1024"])

It keeps the env contract of `BaseEnv` with torch tensors in place of arrays: NEXT_STEP autoreset (a done
row's next step returns the reset observation with reward 0), ``terminated`` and ``truncated`` apart (the
time limit is ``env.max_episode_steps``, else the env's own ``max_steps_in_episode``), and the running
``info["episode_return"]`` / ``info["episode_length"]``. ``env.env_kwargs`` override fields of the env's
``EnvParams``. JAX and gymnax come with the ``jax`` extra (``pip install "rlightning[jax]"``).
"""

from __future__ import annotations

import importlib
import os
from typing import Any, Callable, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

from rlightning.env.base_env import BaseEnv
from rlightning.env.errors import caller_error
from rlightning.env.suites import MissingSuiteError
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import ENVS, closest

logger = get_logger(__name__)

__all__ = ["BraxEnv", "GymnaxEnv", "import_brax", "import_gymnax", "make_brax", "make_gymnax"]

_INSTALL = 'pip install "rlightning[jax]"'


def _import_jax_suite(backend: str, module: str, install: str) -> Tuple[Any, Any]:
    """``(jax, module)``, or a `MissingSuiteError` (an ``ImportError``) naming the extra to install."""
    try:
        import jax

        suite = importlib.import_module(module)
    except ImportError as err:
        name = module.split(".")[0]
        raise MissingSuiteError(f"env.backend={backend!r} needs jax and {name} ({err}): {install}") from None
    return jax, suite


def import_gymnax() -> Tuple[Any, Any]:
    """``(jax, gymnax)``, or a `MissingSuiteError` (an ``ImportError``) naming the extra to install."""
    return _import_jax_suite("gymnax", "gymnax", _INSTALL)


def make_gymnax(name: str, env_kwargs: Optional[Dict[str, Any]] = None) -> Tuple[Any, Any]:
    """The gymnax env and its ``EnvParams`` for id ``name``, with ``env_kwargs`` overriding params fields.

    Raises:
        KeyError: an unknown gymnax id; the message lists the closest registered ids.
        ValueError: an ``env_kwargs`` key that is not a field of the env's ``EnvParams``.
        MissingSuiteError: jax or gymnax is not installed (the extra to install named).
    """
    _, gymnax = import_gymnax()
    known = list(gymnax.registered_envs)
    if not isinstance(name, str) or name not in known:
        near = closest(str(name), known, n=5)
        hint = f" Closest gymnax ids: {', '.join(repr(n) for n in near)}." if near else ""
        raise KeyError(f"env.name={name!r} is not a gymnax id.{hint} All gymnax ids: gymnax.registered_envs")
    env, params = gymnax.make(name)
    kwargs = dict(env_kwargs or {})
    fields = set(getattr(type(params), "__dataclass_fields__", {}))
    unknown = sorted(k for k in kwargs if k not in fields)
    if unknown:
        raise ValueError(
            f"env.env_kwargs {unknown} are not fields of {name}'s EnvParams; valid: {', '.join(sorted(fields))}"
        )
    if kwargs:
        params = params.replace(**kwargs)
    return env, params


def gymnax_space(space: Any) -> gym.Space:
    """A gymnax ``Box`` / ``Discrete`` as the gymnasium space of one sub-env.

    Raises:
        TypeError: a gymnax space kind this backend does not translate (named).
    """
    kind = type(space).__name__
    if kind == "Discrete":
        return gym.spaces.Discrete(int(space.n))
    if kind == "Box":
        shape = tuple(space.shape)
        dtype = np.dtype(space.dtype)
        low = np.broadcast_to(np.asarray(space.low, dtype=dtype), shape)
        high = np.broadcast_to(np.asarray(space.high, dtype=dtype), shape)
        return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    raise TypeError(f"gymnax space {kind} has no translation here; the gymnax backend supports Box and Discrete")


_COMPILED: Dict[Tuple[Any, ...], Tuple[Callable, Callable]] = {}


def _vector_functions(env: Any, params: Any) -> Tuple[Callable, Callable]:
    """The jitted ``reset(key, num_envs)`` and ``step(carry, action, limit)`` of a batch of copies of ``env``.

    The carry is ``(key, state, done, time, ep_return, ep_length)``: one JAX key for the batch, the rest with a
    leading row axis. ``step`` autoresets the NEXT_STEP way: a row done on the previous step returns its reset
    observation with reward 0 and done False.

    Only the rows that reset draw a reset (`_reset_rows`): drawing one for every row on every step, as an env's
    own autoreset does, put ``2 N`` threefry key derivations and ``N`` reset draws into each step; on a CPU they
    cost ten times the env's ``step_env`` itself (115 against 9 us for 1,024 CartPoles). Per-row step keys are
    derived from the batch key each step; an env whose ``step_env`` ignores its key (CartPole) has them removed
    by XLA as dead code.
    """
    import jax
    import jax.numpy as jnp

    inner = params.replace(max_steps_in_episode=2**30) if hasattr(params, "max_steps_in_episode") else params
    reset_many = jax.vmap(env.reset_env, in_axes=(0, None))
    step_many = jax.vmap(env.step_env, in_axes=(0, 0, 0, None))

    def reset(key: Any, num_envs: int) -> Tuple[Any, ...]:
        key, sub = jax.random.split(key)
        obs, state = reset_many(jax.random.split(sub, num_envs), inner)
        # strong dtypes, as the step returns them (a weakly typed leaf, brax's zero reward, would compile twice)
        state = jax.tree_util.tree_map(lambda x: jax.lax.convert_element_type(x, x.dtype), state)
        zero_f, zero_i = jnp.zeros(num_envs, jnp.float32), jnp.zeros(num_envs, jnp.int32)
        return obs.astype(jnp.float32), (key, state, jnp.zeros(num_envs, bool), zero_i, zero_f, zero_i)

    def step(carry: Tuple[Any, ...], action: Any, limit: Any) -> Tuple[Any, ...]:
        key, state, prev_done, t, ep_ret, ep_len = carry
        n = prev_done.shape[0]
        key, k_step, k_reset = jax.random.split(key, 3)
        obs, state, reward, term, _ = step_many(jax.random.split(k_step, n), state, action, inner)
        obs, state = _reset_rows(reset_many, inner, k_reset, prev_done, obs, state)
        obs = obs.astype(jnp.float32)
        reward = jnp.where(prev_done, 0.0, reward).astype(jnp.float32)
        t = jnp.where(prev_done, 0, t + 1)
        term = jnp.logical_and(~prev_done, term.astype(bool))
        trunc = jnp.logical_and(jnp.logical_and(~prev_done, ~term), t >= limit)
        ep_ret = jnp.where(prev_done, 0.0, ep_ret + reward)
        ep_len = jnp.where(prev_done, 0, ep_len + 1)
        done = jnp.logical_or(term, trunc)
        # The step's scalars as one float32 [5, N] array: one DLPack hand-over instead of five, each a row.
        scalars = jnp.stack(
            [reward, term.astype(jnp.float32), trunc.astype(jnp.float32), ep_ret, ep_len.astype(jnp.float32)]
        )
        return (obs, scalars), (key, state, done, t, ep_ret, ep_len)

    return jax.jit(reset, static_argnums=1), jax.jit(step)


def _reset_rows(reset_many: Callable, params: Any, key: Any, rows: Any, obs: Any, state: Any) -> Tuple[Any, Any]:
    """``obs`` and ``state`` with the ``rows`` (a bool per row) replaced by fresh resets.

    When at most an eighth of the rows reset (every step of a usual rollout: a CartPole episode is 20 to 500
    steps long), their indices are gathered and only they draw a reset (1,024 CartPoles: 32 against 115 us a
    step); else every row draws one and a select keeps the resetting rows'.
    """
    import jax
    import jax.numpy as jnp

    n = rows.shape[0]
    most = max(16, n // 8)

    def some(_: Any) -> Tuple[Any, Any]:
        idx = jnp.nonzero(rows, size=most, fill_value=n)[0]  # index n (out of range) is dropped by the scatter
        obs_r, state_r = reset_many(jax.random.split(key, most), params)
        put = lambda old, new: old.at[idx].set(new.astype(old.dtype), mode="drop")  # noqa: E731
        return put(obs, obs_r), jax.tree_util.tree_map(put, state, state_r)

    def every(_: Any) -> Tuple[Any, Any]:
        obs_r, state_r = reset_many(jax.random.split(key, n), params)

        def pick(old: Any, new: Any) -> Any:
            return jnp.where(rows.reshape((n,) + (1,) * (old.ndim - 1)), new.astype(old.dtype), old)

        return pick(obs, obs_r), jax.tree_util.tree_map(pick, state, state_r)

    return jax.lax.cond(jnp.sum(rows) <= most, some, every, None)


def _response_action(policy_resp: PolicyResponse) -> Any:
    return policy_resp.action


@ENVS.register("gymnax")
class GymnaxEnv(BaseEnv):
    """``num_envs`` copies of a gymnax env stepped as one jitted JAX function; `EnvRet` fields are torch tensors.

    Args:
        config: Env config: ``name`` (a gymnax id), ``env_kwargs`` (``EnvParams`` fields), ``num_envs``,
            ``max_episode_steps``.
        worker_index: Global worker index (makes ``env_id`` unique).
        preprocess_fn: `PolicyResponse` -> batched action (a tensor or an array of ``num_envs`` actions).

    Raises:
        KeyError: an unknown gymnax id (closest ids listed).
        ValueError: an ``env_kwargs`` key that is no ``EnvParams`` field.
        MissingSuiteError: jax or gymnax is not installed.
    """

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
    ) -> None:
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        import torch

        self._jax = self._import()[0]
        self.gymnax_env, self.params, default_limit = self._make(config)
        self.max_episode_steps = int(config.max_episode_steps or default_limit)
        key = (type(self).__name__, config.name, repr(sorted(dict(config.env_kwargs).items())))
        if key not in _COMPILED:  # one jitted pair per env and params in a process: compiled once per shape
            _COMPILED[key] = _vector_functions(self.gymnax_env, self.params)
        self._reset_fn, step = _COMPILED[key]
        limit_j = self._jax.numpy.int32(self.max_episode_steps)  # an argument, not a constant: no recompilation
        self._step_fn = lambda carry, action: step(carry, action, limit_j)
        jax_device = self._jax.devices()[0]
        self.device = torch.device("cuda", jax_device.id) if jax_device.platform == "gpu" else torch.device("cpu")
        self._discrete = isinstance(self.single_action_space, gym.spaces.Discrete)
        self._carry: Optional[Tuple[Any, ...]] = None
        # The response's action as it is (a tensor stays a tensor); a custom preprocess_fn is used as given.
        self._take_action = _response_action if preprocess_fn in (None, default_env_preprocess_fn) else preprocess_fn

    _import = staticmethod(import_gymnax)

    def _make(self, config: EnvConfig) -> Tuple[Any, Any, int]:
        """The env (``reset_env`` / ``step_env`` in gymnax's form), its params and its own time limit; sets the
        spaces of one sub-env."""
        env, params = make_gymnax(config.name, config.env_kwargs)
        self.single_observation_space = gymnax_space(env.observation_space(params))
        self.single_action_space = gymnax_space(env.action_space(params))
        return env, params, int(getattr(params, "max_steps_in_episode", 2**30))

    @classmethod
    def prepare(cls, config: EnvConfig) -> Dict[str, Any]:
        """Check in the driver that jax and gymnax are installed and ``config.name`` is a gymnax id."""
        make_gymnax(config.name, config.env_kwargs)
        return {}

    def _key(self, seed: Optional[int]) -> Any:
        if seed is None:
            seed = int.from_bytes(os.urandom(4), "little")
        return self._jax.random.PRNGKey(int(seed))

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> EnvRet:
        """Reset every sub-env; ``seed`` seeds the batch's JAX key (None: a random seed; the group gives each
        worker its own seed)."""
        import torch

        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise caller_error(ValueError(f"env {self.env_id}: seed must be None or an int >= 0, got {seed!r}"))
        obs, self._carry = self._reset_fn(self._key(seed), self.num_envs)
        n, dev = self.num_envs, self.device
        zeros_f = torch.zeros(n, dtype=torch.float32, device=dev)
        zeros_b = torch.zeros(n, dtype=torch.bool, device=dev)
        info = {"episode_return": zeros_f, "episode_length": torch.zeros(n, dtype=torch.int32, device=dev)}
        return EnvRet(self.env_id, torch.from_dlpack(obs), zeros_f, zeros_b, zeros_b.clone(), info)

    def step(self, policy_resp: PolicyResponse) -> EnvRet:
        """Step every sub-env with the response's batched action (handed to JAX through DLPack).

        Raises:
            ValueError: step before reset, or an action whose shape is not ``[num_envs]`` (named with the space).
        """
        self.check_policy_resp(policy_resp)
        if self._carry is None:
            raise caller_error(ValueError(f"env {self.env_id}: step() before reset(); call reset() first"))
        try:
            action = self._to_jax(self._take_action(policy_resp))
        except Exception as err:  # noqa: BLE001 - a bad action or preprocess_fn is the caller's bug
            caller_error(err)
            raise
        (obs, scalars), self._carry = self._step_fn(self._carry, action)
        self.episodes.steps += self.num_envs
        from torch import from_dlpack

        s = from_dlpack(scalars)  # [5, N]: reward, terminated, truncated, episode return, episode length
        info = {"episode_return": s[3], "episode_length": s[4].int()}
        return EnvRet(self.env_id, from_dlpack(obs), s[0], s[1].bool(), s[2].bool(), info)

    def _to_jax(self, action: Any) -> Any:
        """The batched action as a JAX array: a torch tensor through DLPack (int32 / float32), else via JAX."""
        import torch

        jnp = self._jax.numpy
        shape = (self.num_envs,) + tuple(self.single_action_space.shape)
        got = tuple(getattr(action, "shape", np.shape(action)))
        if got != shape and not (self._discrete and got == (self.num_envs, 1)):
            raise caller_error(
                ValueError(
                    f"env {self.env_id}: action of shape {got} does not fit {self.num_envs} sub-envs of "
                    f"{self.single_action_space}; expected shape {shape}"
                )
            )
        if isinstance(action, torch.Tensor):
            action = action.reshape(shape).to(torch.int32 if self._discrete else torch.float32).contiguous()
            if self._discrete and action.device.type == "cpu":  # on a GPU this check would sync every step
                n = self.single_action_space.n
                low, high = torch.aminmax(action)  # one pass (three ops and an any() took 3x as long)
                if int(low) < 0 or int(high) >= n:
                    bad = action[(action < 0) | (action >= n)]
                    raise ValueError(
                        f"env {self.env_id}: action {int(bad[0])} is outside {self.single_action_space}; "
                        f"valid actions are 0..{n - 1}"
                    )
            return self._jax.dlpack.from_dlpack(action)
        return jnp.asarray(action, dtype=jnp.int32 if self._discrete else jnp.float32).reshape(shape)

    def get_metadata(self) -> EnvMeta:
        """Env id, the spaces of one sub-env (gymnasium spaces) and ``num_envs``."""
        return EnvMeta(
            env_id=self.env_id,
            action_space=self.single_action_space,
            observation_space=self.single_observation_space,
            num_envs=self.num_envs,
        )

    def recreate_env(self, seed: Optional[int] = None) -> EnvRet:
        """Start every sub-env again (the state is only the JAX carry) and return the reset `EnvRet`."""
        self._carry = None
        return self.reset(seed=seed)


# ---------------------------------------------------------------------------------------------------- brax


def import_brax() -> Tuple[Any, Any]:
    """``(jax, brax.envs)``, or a `MissingSuiteError` (an ``ImportError``) naming the extra to install."""
    return _import_jax_suite("brax", "brax.envs", 'pip install "rlightning[brax]"')


class _BraxSteps:
    """A brax env in gymnax's form (what `_vector_functions` vmaps): ``reset_env(key, params)`` -> ``(obs,
    state)``, ``step_env(key, state, action, params)`` -> ``(obs, state, reward, done, info)``; brax's own state
    is the state (its step takes no key; its ``done`` is the termination: the time limit is ours)."""

    def __init__(self, env: Any) -> None:
        self.env = env

    def reset_env(self, key: Any, params: Any) -> Tuple[Any, Any]:
        state = self.env.reset(key)
        return state.obs, state

    def step_env(self, key: Any, state: Any, action: Any, params: Any) -> Tuple[Any, ...]:
        state = self.env.step(state, action)
        return state.obs, state, state.reward, state.done, {}


def make_brax(name: str, env_kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """The brax env ``name`` (``brax.envs.get_environment``, ``env_kwargs`` its keyword arguments: ``backend``
    and the env's own).

    Raises:
        KeyError: an unknown brax env; the message lists the closest registered names.
        ValueError: keyword arguments the env does not take (its error quoted), or an observation that is not
            one flat vector.
        MissingSuiteError: jax or brax is not installed.
    """
    _, envs = import_brax()
    known = sorted(getattr(envs, "_envs", {}))
    if not isinstance(name, str) or (known and name not in known):
        near = closest(str(name), known, n=5)
        hint = f" Closest brax envs: {', '.join(repr(n) for n in near)}." if near else ""
        raise KeyError(f"env.name={name!r} is not a brax env.{hint} All: {', '.join(known)}")
    try:
        env = envs.get_environment(name, **dict(env_kwargs or {}))
    except TypeError as err:
        raise ValueError(
            f"env.env_kwargs {sorted(dict(env_kwargs or {}))} do not fit brax env {name!r}: {err}"
        ) from None
    if not isinstance(env.observation_size, int):
        raise ValueError(
            f"brax env {name!r} has observations {env.observation_size!r}; the brax backend takes one flat vector"
        )
    return env


@ENVS.register("brax")
class BraxEnv(GymnaxEnv):
    """``num_envs`` copies of a brax env (``env.backend: brax``, ``env.name`` a brax env such as ``ant``,
    ``inverted_pendulum``; ``env.env_kwargs`` its keyword arguments, e.g. ``backend: spring``) stepped as one
    jitted JAX function, exactly as the gymnax backend steps gymnax envs: state on the device, NEXT_STEP
    autoreset of the rows that ended, the time limit ``env.max_episode_steps`` (default 1000, brax's training
    episode length) as ``truncated``, batches in torch via DLPack. Actions are ``Box(-1, 1, (action_size,))``.

    Raises:
        KeyError: an unknown brax env (closest names listed).
        ValueError: keyword arguments the env does not take.
        MissingSuiteError: jax or brax is not installed.
    """

    _import = staticmethod(import_brax)

    def _make(self, config: EnvConfig) -> Tuple[Any, Any, int]:
        env = make_brax(config.name, config.env_kwargs)
        obs, act = int(env.observation_size), int(env.action_size)
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act,), np.float32)
        return _BraxSteps(env), None, 1000

    @classmethod
    def prepare(cls, config: EnvConfig) -> Dict[str, Any]:
        """Check in the driver that jax and brax are installed and ``config.name`` is a brax env."""
        make_brax(config.name, config.env_kwargs)
        return {}
