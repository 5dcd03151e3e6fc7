"""The PettingZoo backend (``env.backend: pettingzoo``): any parallel-API PettingZoo env, vectorised.

``env.name`` names the env module the way PettingZoo documents it, package and
env joined by a colon (``mpe2:simple_spread_v3``, ``pettingzoo.butterfly:pistonball_v6``),
or a ``module:callable`` returning a ``ParallelEnv``; ``env_kwargs`` go to its
``parallel_env(...)`` (``N``, ``max_cycles``, ...). The worker runs ``num_envs``
copies and answers every call with one `MultiAgentEnvRet` for all of them:

- ``observation[agent]``: ``[num_envs, *obs_shape]`` of each of the env's
  ``possible_agents`` (zeros for an agent that is not in the episode any more);
- ``last_reward[agent]``: float32 ``[num_envs]``; ``last_terminated[agent]`` /
  ``last_truncated[agent]``: bool ``[num_envs]``. An agent that finished stays
  done (reward 0) until its sub-env's episode ends, which is when every agent is
  done; the next step resets that sub-env (gymnasium's NEXT_STEP autoreset: its
  actions are ignored, reward 0, flags False);
- ``info["active"][agent]``: bool ``[num_envs]``, the agent acts on this
  observation (it is in the episode and the row is not done). The record's
  per-agent ``valid`` mask comes from it: no step of a finished agent reaches
  a loss;
- ``info["episode_return"]``: the team's running return (summed over agents),
  ``info["episode_length"]`` the steps, and ``info["agent_episode_return"][agent]``
  each agent's own running return.

A missing package fails at once with its install hint
(``pip install "rlightning[pettingzoo]"``). PettingZoo is imported only when a
worker is built.
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
from gymnasium import spaces

from rlightning.env.base_env import BaseEnv
from rlightning.env.errors import caller_error
from rlightning.env.multi_agent_env import agent_actions
from rlightning.env.suites import MissingSuiteError
from rlightning.env.utils.spaces import make_action_check
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.types import EnvMeta, MultiAgentEnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.registry import ENVS

__all__ = ["PettingZooEnv", "make_parallel_env"]

_HINT = 'pip install "rlightning[pettingzoo]"'


def _import(module: str, name: str) -> Any:
    """Import ``module``; a missing top-level package (PettingZoo, the env's suite) raises with the hint."""
    try:
        return importlib.import_module(module)
    except ImportError as err:
        top = module.split(".")[0]
        missing = getattr(err, "name", None)
        if missing is not None and missing.split(".")[0] in (top, "pettingzoo") and "." not in missing:
            raise MissingSuiteError(f"env {name!r} needs {missing}, which is not installed ({err}): {_HINT}") from None
        raise


def env_module_or_callable(name: str, backend: str, example: str, importer: Callable[[str, str], Any] = _import) -> Any:
    """What ``env.name`` (``package:env_module`` or ``module:callable``) names: the env module or the callable,
    imported with ``importer`` (module, name), which raises the backend's install hint.

    Raises:
        ValueError: a name without ``:``, or a package without that module or callable.
    """
    if not isinstance(name, str) or ":" not in name:
        raise ValueError(
            f"the {backend} backend takes env.name as 'package:env_module' (e.g. {example!r}), got {name!r}"
        )
    importer("pettingzoo", name)
    package, attr = name.split(":", 1)
    try:
        return importer(f"{package}.{attr}", name)
    except ModuleNotFoundError as err:
        if err.name != f"{package}.{attr}":
            raise
        base = importer(package, name)
        if not hasattr(base, attr):
            raise ValueError(f"env {name!r}: {package} has no env module or callable {attr!r}") from None
        return getattr(base, attr)


def make_parallel_env(name: str, env_kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """Build one PettingZoo ``ParallelEnv`` from ``env.name`` (see the module docstring).

    Raises:
        MissingSuiteError: PettingZoo or the env's package is not installed (names the extra).
        ValueError: a name that is not ``package:env`` or does not lead to a parallel env.
    """
    factory = env_module_or_callable(name, "pettingzoo", "mpe2:simple_spread_v3")
    if hasattr(factory, "parallel_env"):
        factory = factory.parallel_env
    if not callable(factory):
        if hasattr(factory, "env"):
            raise ValueError(
                f"env {name!r} is a turn-based (AEC) PettingZoo env without parallel_env(); use "
                "env.backend: pettingzoo_aec"
            )
        raise ValueError(f"env {name!r}: {factory!r} is not a parallel_env factory")
    env = factory(**dict(env_kwargs or {}))
    from pettingzoo.utils.env import AECEnv

    if isinstance(env, AECEnv):
        raise ValueError(
            f"env {name!r} built a turn-based (AEC) env {type(env).__name__}; use env.backend: pettingzoo_aec"
        )
    if not (hasattr(env, "possible_agents") and hasattr(env, "step") and hasattr(env, "observation_space")):
        raise ValueError(
            f"env {name!r} built a {type(env).__name__}, not a PettingZoo ParallelEnv (it needs possible_agents, "
            "observation_space(agent) and a step taking a dict of actions); use the env's parallel_env"
        )
    return env


def _check_fixed_shape(space: Any, what: str) -> None:
    """Every leaf of an agent's observation space (a Dict's entries, e.g. PettingZoo's ``action_mask``) has a
    fixed shape."""
    if isinstance(space, spaces.Dict):
        for sub in space.spaces.values():
            _check_fixed_shape(sub, what)
    elif getattr(space, "shape", None) is None:
        raise ValueError(f"{what} without a shape (Box, Discrete, Multi*, or a Dict of them)")


def _rows(space: Any, n: int) -> Any:
    """Zeroed observation rows ``[n, *shape]`` for ``space``: an array, or a dict of them for a Dict space."""
    if isinstance(space, spaces.Dict):
        return {k: _rows(sub, n) for k, sub in space.spaces.items()}
    return np.zeros((n,) + tuple(space.shape), dtype=space.dtype)


def _write_row(rows: Any, i: int, value: Any) -> None:
    """Row ``i`` of ``rows`` set to one observation (zeros for None: an agent out of the episode)."""
    if isinstance(rows, dict):
        for k, sub in rows.items():
            _write_row(sub, i, None if value is None else value[k])
    else:
        rows[i] = 0 if value is None else value


def _copy_rows(rows: Any) -> Any:
    return {k: _copy_rows(v) for k, v in rows.items()} if isinstance(rows, dict) else rows.copy()


@ENVS.register("pettingzoo")
class PettingZooEnv(BaseEnv):
    """``num_envs`` copies of a PettingZoo parallel env as one multi-agent env worker.

    Raises:
        MissingSuiteError: PettingZoo or the env's package is missing.
        ValueError: a bad ``env.name``, or agents whose spaces have no fixed shape.
    """

    multi_agent = True
    """Observations, rewards and flags are dicts keyed by agent id (the engines build a `MultiAgentPolicy`)."""

    @classmethod
    def prepare(cls, config: EnvConfig) -> Dict[str, Any]:
        """Check in the driver that the env's package imports (the hint comes before any worker starts)."""
        make_parallel_env(config.name, config.env_kwargs).close()
        return {}

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
    ) -> None:
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        kwargs = dict(config.env_kwargs)
        if config.max_episode_steps is not None:
            kwargs.setdefault("max_cycles", config.max_episode_steps)
        self._envs = [make_parallel_env(config.name, kwargs) for _ in range(self.num_envs)]
        first = self._envs[0]
        self.agent_ids: Tuple[str, ...] = tuple(str(a) for a in first.possible_agents)
        self._raw_ids = list(first.possible_agents)
        self.observation_spaces = {str(a): first.observation_space(a) for a in self._raw_ids}
        self.action_spaces = {str(a): first.action_space(a) for a in self._raw_ids}
        for agent, space in self.observation_spaces.items():
            _check_fixed_shape(space, f"env {self.env_id}: agent {agent!r} has an observation space {space!r}")
        self._checks = {
            a: make_action_check(self.action_spaces[a], self.num_envs, f"{self.env_id} agent {a}")
            for a in self.agent_ids
        }
        n = self.num_envs
        self._obs = {a: _rows(s, n) for a, s in self.observation_spaces.items()}
        self._alive = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        self._agent_return = {a: np.zeros(n, dtype=np.float64) for a in self.agent_ids}
        self._prev_done: Optional[np.ndarray] = None
        self._needs_reset = True

    # ------------------------------------------------------------------ helpers

    def _reset_row(self, i: int, seed: Optional[int]) -> None:
        obs, _ = self._envs[i].reset(seed=seed)
        for raw, a in zip(self._raw_ids, self.agent_ids):
            self._alive[a][i] = raw in obs
            _write_row(self._obs[a], i, obs[raw] if raw in obs else None)
            self._agent_return[a][i] = 0.0

    def _ret(self, reward, terminated, truncated, ep_return, ep_length, done_rows) -> MultiAgentEnvRet:
        active = {a: self._alive[a] & ~done_rows for a in self.agent_ids}
        return MultiAgentEnvRet(
            env_id=self.env_id,
            observation={a: _copy_rows(self._obs[a]) for a in self.agent_ids},
            last_reward=reward,
            last_terminated=terminated,
            last_truncated=truncated,
            info={
                "episode_return": ep_return,
                "episode_length": ep_length,
                "agent_episode_return": {a: self._agent_return[a].copy() for a in self.agent_ids},
                "active": active,
            },
        )

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> MultiAgentEnvRet:
        """Reset every copy (copy ``j`` seeded with ``seed + j`` when ``seed`` is given)."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise caller_error(ValueError(f"env {self.env_id}: seed must be None or an int >= 0, got {seed!r}"))
        for i in range(self.num_envs):
            self._reset_row(i, None if seed is None else int(seed) + i)
        self._prev_done = None
        self._needs_reset = False
        ep_return, ep_length = self.episodes.reset()
        n = self.num_envs
        flags = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        return self._ret(
            {a: np.zeros(n, dtype=np.float32) for a in self.agent_ids},
            flags,
            {a: np.zeros(n, dtype=bool) for a in self.agent_ids},
            ep_return,
            ep_length,
            np.zeros(n, dtype=bool),
        )

    def _actions(self, policy_resp: PolicyResponse) -> Dict[str, np.ndarray]:
        action = agent_actions(self, policy_resp, self._needs_reset)
        unknown = sorted(str(a) for a in action if a not in self._checks)
        if unknown:
            raise ValueError(
                f"env {self.env_id}: actions for unknown agent(s) {unknown}; agents are {list(self.agent_ids)}"
            )
        missing = [a for a in self.agent_ids if a not in action]
        if missing:
            raise ValueError(f"env {self.env_id}: no action for agent(s) {missing}; agents are {list(self.agent_ids)}")
        return {a: self._checks[a](action[a]) for a in self.agent_ids}

    def step(self, policy_resp: PolicyResponse) -> MultiAgentEnvRet:
        """Step every copy with its agents' actions; copies whose episode ended on the last step are reset.

        Raises:
            ValueError: an agent's action is missing, unknown or outside its space (env, agent, value named).
        """
        try:  # the input checks are the caller's (raised at once, never a restart)
            actions = self._actions(policy_resp)
        except Exception as err:  # noqa: BLE001
            caller_error(err)
            raise
        n = self.num_envs
        reward = {a: np.zeros(n, dtype=np.float32) for a in self.agent_ids}
        term = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        trunc = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        prev = self._prev_done
        for i, env in enumerate(self._envs):
            if prev is not None and prev[i]:
                self._reset_row(i, None)
                continue
            act = {raw: _scalar(actions[a][i]) for raw, a in zip(self._raw_ids, self.agent_ids) if self._alive[a][i]}
            obs, rew, te, tr, _ = env.step(act)
            for raw, a in zip(self._raw_ids, self.agent_ids):
                if not self._alive[a][i]:  # finished earlier: stays done, reward 0
                    term[a][i] = True
                    continue
                reward[a][i] = float(rew.get(raw, 0.0))
                term[a][i] = bool(te.get(raw, False))
                trunc[a][i] = bool(tr.get(raw, False)) and not term[a][i]
                if raw in obs:
                    _write_row(self._obs[a], i, obs[raw])
                if term[a][i] or trunc[a][i] or raw not in env.agents:
                    self._alive[a][i] = False
                    term[a][i] = term[a][i] or not trunc[a][i]
        done = np.logical_and.reduce([term[a] | trunc[a] for a in self.agent_ids])
        team = np.sum([reward[a] for a in self.agent_ids], axis=0).astype(np.float32)
        for a in self.agent_ids:
            self._agent_return[a] += reward[a]
        self._prev_done = done if done.any() else None
        ep_return, ep_length = self.episodes.update(team, done)
        return self._ret(reward, term, trunc, ep_return, ep_length, done)

    def get_metadata(self) -> EnvMeta:
        """Dict spaces keyed by agent id (the spaces of one copy)."""
        return EnvMeta(
            env_id=self.env_id,
            action_space=spaces.Dict(dict(self.action_spaces)),
            observation_space=spaces.Dict(dict(self.observation_spaces)),
            num_envs=self.num_envs,
        )

    def close(self) -> None:
        """Close every copy."""
        for env in self._envs:
            env.close()


def _scalar(value: np.ndarray) -> Any:
    return value.item() if np.ndim(value) == 0 else value


def agent_ids_of(env_meta: EnvMeta) -> List[str]:
    """The agent ids of a multi-agent env's `EnvMeta` (its Dict action space's keys)."""
    return [str(a) for a in env_meta.action_space.spaces]
