"""`MultiAgentRecordWriter`: one rollout of a multi-agent env worker, per agent, in preallocated arrays.

The multi-agent twin of `rlightning.env.utils.record_writer.RecordWriter`
(same calls, so `RolloutWorker.collect` drives either). It writes the
record layout of `rlightning.types.multi_agent_record`: each agent's
observation, action, policy extras, reward and flags under ``agents.<id>``,
its ``valid`` mask (the agent acted on that observation: it was still in the
episode and the step was not an autoreset step), and the env-level reward
(summed over agents) and done flags (a sub-env is done when every agent is)
that storages use to cut episodes.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from rlightning.env.utils.episodes import EpisodeIds
from rlightning.env.utils.record_writer import _alloc, _cut, _write


def _check_agents(value: Any, agents: Sequence[str], what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} must be a dict of agent id -> [num_envs, ...] arrays, got {type(value).__name__}")
    if set(value) != set(agents):
        missing = sorted(set(agents) - set(value))
        unknown = sorted(map(str, set(value) - set(agents)))
        raise ValueError(f"{what}: agents {sorted(agents)} expected; missing {missing}, unknown {unknown}")
    return value


class MultiAgentRecordWriter:
    """Arrays of one ``[N, T]`` multi-agent rollout, filled by `write_step`.

    Args:
        env_id: The env worker's id.
        num_envs: N.
        num_steps: T.
        first_obs: ``{agent: [N, ...]}``, the observation the first action is chosen on.
        start_done: Done flags ``[N]`` of the EnvRet that observation came with.
        first_active: ``{agent: [N] bool}``, which agents act on that observation (None: all).

    Raises:
        TypeError, ValueError: observations that are not a dict of ``[N, ...]`` arrays.
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        num_steps: int,
        first_obs: Any,
        start_done: np.ndarray,
        first_active: Optional[Mapping[str, Any]] = None,
    ) -> None:
        self.env_id = env_id
        self.num_envs = n = int(num_envs)
        self.num_steps = t = int(num_steps)
        if not isinstance(first_obs, Mapping) or not first_obs:
            raise TypeError(
                f"env {env_id}: a multi-agent observation must be a non-empty dict of agent id -> [num_envs, ...] "
                f"arrays, got {type(first_obs).__name__}"
            )
        self.agents = [str(a) for a in first_obs]
        self.obs: Dict[str, Any] = {}  # per agent: an array, or a dict of them (a Dict space, e.g. action_mask)
        for a in self.agents:
            what = f"env {env_id}: observation of agent {a!r}"
            self.obs[a] = _alloc(first_obs[a], n, t + 1, what)
            _write(self.obs[a], 0, first_obs[a], what)
        self.active = {a: np.ones((n, t + 1), dtype=bool) for a in self.agents}
        if first_active is not None:
            for a, m in _check_agents(first_active, self.agents, f"env {env_id}: info['active']").items():
                self.active[a][:, 0] = m
        self.reward = {a: np.empty((n, t), dtype=np.float32) for a in self.agents}
        self.terminated = {a: np.empty((n, t), dtype=bool) for a in self.agents}
        self.truncated = {a: np.empty((n, t), dtype=bool) for a in self.agents}
        self.start_done = np.asarray(start_done, dtype=bool).reshape(n)
        self.extras: Optional[Dict[str, Dict[str, np.ndarray]]] = None

    def _alloc_extras(self, out: Mapping[str, Any]) -> Dict[str, Dict[str, np.ndarray]]:
        if "action" not in out:
            raise KeyError(f"env {self.env_id}: the policy returned no 'action' (keys: {sorted(out)})")
        extras: Dict[str, Dict[str, np.ndarray]] = {}
        for key, per_agent in out.items():
            per_agent = _check_agents(per_agent, self.agents, f"env {self.env_id}: policy output {key!r}")
            extras[key] = {}
            for a in self.agents:
                arr = np.asarray(per_agent[a])
                if arr.dtype == object or arr.ndim == 0 or arr.shape[0] != self.num_envs:
                    raise ValueError(
                        f"env {self.env_id}: policy output {key!r} of agent {a!r} has shape {arr.shape}; expected "
                        f"a leading dimension of num_envs={self.num_envs}"
                    )
                extras[key][a] = np.empty((self.num_envs, self.num_steps) + arr.shape[1:], dtype=arr.dtype)
        return extras

    def write_step(
        self,
        t: int,
        out: Mapping[str, Any],
        next_obs: Any,
        reward: Any,
        terminated: Any,
        truncated: Any,
        active: Optional[Mapping[str, Any]] = None,
    ) -> None:
        """Step ``t``: the policy's per-agent outputs and what the env returned for them.

        Raises:
            KeyError, TypeError, ValueError: an output, observation or flag that is not one ``[N, ...]`` array
                per agent of the first step.
        """
        extras = self.extras
        if extras is None:
            extras = self.extras = self._alloc_extras(out)
        for key, bufs in extras.items():
            if key not in out:
                raise KeyError(f"env {self.env_id}: the policy stopped returning {key!r} at step {t}")
            per_agent = _check_agents(out[key], self.agents, f"env {self.env_id}: policy output {key!r}")
            for a, buf in bufs.items():
                buf[:, t] = per_agent[a]
        next_obs = _check_agents(next_obs, self.agents, f"env {self.env_id}: observation")
        reward = _check_agents(reward, self.agents, f"env {self.env_id}: last_reward")
        terminated = _check_agents(terminated, self.agents, f"env {self.env_id}: last_terminated")
        truncated = _check_agents(truncated, self.agents, f"env {self.env_id}: last_truncated")
        for a in self.agents:
            _write(self.obs[a], t + 1, next_obs[a], f"env {self.env_id}: observation of agent {a!r}")
            self.reward[a][:, t] = reward[a]
            self.terminated[a][:, t] = terminated[a]
            self.truncated[a][:, t] = truncated[a]
        if active is not None:
            for a, m in _check_agents(active, self.agents, f"env {self.env_id}: info['active']").items():
                self.active[a][:, t + 1] = m

    def write_ret(self, t: int, out: Mapping[str, Any], env_ret: Any) -> None:
        """Step ``t``: the policy's per-agent outputs and the EnvRet the env answered them with (`write_step`;
        which agents act next comes with it)."""
        self.write_step(
            t,
            out,
            env_ret.observation,
            env_ret.last_reward,
            env_ret.last_terminated,
            env_ret.last_truncated,
            active_of(env_ret),
        )

    def finish(self, episodes: EpisodeIds, steps: Optional[int] = None, last_value: Any = None) -> Dict[str, Any]:
        """The rollout's arrays (``agents`` holds one dict per agent); see `multi_agent_arrays_to_record`."""
        n = self.num_envs
        t = self.num_steps if steps is None else int(steps)
        term_all = np.logical_and.reduce([self.terminated[a][:, :t] | self.truncated[a][:, :t] for a in self.agents])
        any_trunc = np.logical_or.reduce([self.truncated[a][:, :t] for a in self.agents])
        done = term_all
        valid = np.empty((n, t), dtype=bool)
        if t:
            valid[:, 0] = ~self.start_done
            valid[:, 1:] = ~done[:, :-1]
        agents: Dict[str, Dict[str, np.ndarray]] = {}
        for a in self.agents:
            sub: Dict[str, np.ndarray] = {k: v[a][:, :t] for k, v in (self.extras or {}).items()}
            sub["obs"] = _cut(self.obs[a], t + 1)
            sub["valid"] = valid & self.active[a][:, :t]
            sub["reward"] = self.reward[a][:, :t]
            sub["terminated"] = self.terminated[a][:, :t]
            sub["truncated"] = self.truncated[a][:, :t]
            sub["done"] = sub["terminated"] | sub["truncated"]
            value = (self.extras or {}).get("value", {}).get(a)
            if value is not None and t and value.shape[2:] in ((), (1,)):
                nv = np.zeros((n, t), dtype=np.float32)
                nv[:, :-1] = value[:, 1:t].reshape(n, t - 1)
                if last_value is not None:
                    nv[:, -1] = np.asarray(last_value[a], dtype=np.float32).reshape(n)
                else:
                    nv[:, -1] = value[:, t - 1].reshape(n)
                sub["next_value"] = nv
            agents[a] = sub
        truncated = done & any_trunc
        return {
            "agents": agents,
            "episode_id": episodes.assign(valid),
            "valid": valid,
            "reward": np.sum([self.reward[a][:, :t] for a in self.agents], axis=0).astype(np.float32).reshape(n, t),
            "terminated": done & ~truncated,
            "truncated": truncated,
            "done": done,
        }


def active_of(env_ret: Any) -> Optional[Mapping[str, Any]]:
    """``info["active"]`` of a multi-agent EnvRet (which agents act on its observation), or None."""
    info = env_ret.info if isinstance(env_ret.info, dict) else {}
    active = info.get("active")
    return active if isinstance(active, Mapping) else None


def multi_agent_writer(env_id: str, num_envs: int, num_steps: int, env_ret: Any) -> MultiAgentRecordWriter:
    """The writer of a multi-agent rollout starting at ``env_ret``."""
    from rlightning.env.utils.record_writer import start_done_flags

    return MultiAgentRecordWriter(
        env_id, num_envs, num_steps, env_ret.observation, start_done_flags(env_ret), active_of(env_ret)
    )


def agent_episode_report(env_ret: Any) -> Dict[str, List[float]]:
    """Each agent's own final return in the episodes an EnvRet closes (``info["agent_episode_return"]``)."""
    from rlightning.env.utils.episodes import done_mask

    info = env_ret.info if isinstance(env_ret.info, dict) else {}
    per_agent = info.get("agent_episode_return")
    if not isinstance(per_agent, Mapping):
        return {}
    done = np.asarray(done_mask(env_ret.last_terminated, env_ret.last_truncated), dtype=bool).reshape(-1)
    if not done.any():
        return {}
    return {str(a): np.asarray(r, dtype=np.float64).reshape(-1)[done].tolist() for a, r in per_agent.items()}
