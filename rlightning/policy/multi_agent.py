"""`MultiAgentPolicy`: policies mapped to the agents of a multi-agent env by ``policy.agent_groups``.

The run's algorithm (``policy.type``, e.g. ``ppo``) is built once per policy
group; each group acts for its agents and learns from their steps:

- ``policy.agent_groups: null`` (the default): one group, ``shared``, for every
  agent: parameters shared by all agents (as in IPPO/MAPPO with parameter
  sharing). The agents' observations are stacked into one batch.
- ``policy.agent_groups: {adversaries: [adversary_0], good: [agent_0, agent_1]}``:
  one set of parameters per group. Every agent of the env is in exactly one group,
  and the agents of a group have the same observation and action spaces.

Acting takes ``{agent: [N, ...]}`` observations and returns every output per
agent (``{"action": {agent: [N]}, "log_prob": {...}, ...}``). Learning takes
sampled multi-agent data (`rlightning.types.multi_agent_record`): each group's
batch holds only the valid steps of its agents, so nothing of an agent that had
finished reaches the loss. On-policy groups (ppo, a2c) read per-agent GAE, which runs in the
buffer (`MultiAgentGAE`); off-policy groups (dqn, sac, td3) read each agent's
replay transitions under the single-agent names (``next_obs``, ``reward``, ``terminated``; DQN's
n-step keys come from `MultiAgentNStep`, per agent), and a
prioritized row gets the largest TD error of its agents back (`MultiAgentPolicy.priority_update`).

The engines pick this class for envs that declare ``multi_agent = True``
(`policy_class_for`); modules are registered as ``<group>.<name>``, so weight
sync and checkpoints work unchanged.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.types import EnvMeta, EnvRet, MultiAgentPolicyResponse
from rlightning.types.convert import concat_rows, leading_rows
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import ENVS, POLICIES

__all__ = [
    "SHARED_GROUP",
    "MultiAgentGAE",
    "MultiAgentPolicy",
    "env_is_multi_agent",
    "policy_class_for",
    "probe_agent_ids",
    "resolve_agent_groups",
]

SHARED_GROUP = "shared"


def resolve_agent_groups(
    agent_groups: Optional[Mapping[str, Sequence[str]]], agent_ids: Sequence[str]
) -> Dict[str, List[str]]:
    """The policy groups of an env's agents: ``policy.agent_groups`` checked against ``agent_ids``.

    Args:
        agent_groups: Group name -> agent ids (None: every agent in one ``shared`` group).
        agent_ids: The env's agents.

    Returns:
        Group name -> its agent ids, in the env's agent order.

    Raises:
        ValueError: an unknown agent, an agent in two groups or in none, or an empty group
            (naming it and the env's agents).
    """
    agent_ids = [str(a) for a in agent_ids]
    if agent_groups is None:
        return {SHARED_GROUP: list(agent_ids)}
    if not isinstance(agent_groups, Mapping) or not agent_groups:
        raise ValueError(f"policy.agent_groups must map group names to agent ids, got {agent_groups!r}")
    owner: Dict[str, str] = {}
    for group, members in agent_groups.items():
        if isinstance(members, str) or not isinstance(members, Sequence) or not members:
            raise ValueError(f"policy.agent_groups[{group!r}] must be a non-empty list of agent ids, got {members!r}")
        for agent in members:
            if agent not in agent_ids:
                raise ValueError(
                    f"policy.agent_groups[{group!r}] names agent {agent!r}, which the env does not have; "
                    f"its agents are {agent_ids}"
                )
            if agent in owner:
                raise ValueError(
                    f"agent {agent!r} is in policy.agent_groups {owner[agent]!r} and {group!r}; "
                    "give each agent one group"
                )
            owner[agent] = str(group)
    left = [a for a in agent_ids if a not in owner]
    if left:
        raise ValueError(
            f"agent(s) {left} are in no policy.agent_groups group (groups: {sorted(agent_groups)}); "
            "map every agent of the env to a group"
        )
    return {str(g): [a for a in agent_ids if owner[a] == str(g)] for g in agent_groups}


def env_is_multi_agent(env_cfg: Any) -> bool:
    """True when the env class of ``env_cfg`` declares ``multi_agent = True`` (PettingZoo, rendezvous)."""
    backend = getattr(env_cfg, "backend", "gymnasium")
    name = getattr(env_cfg, "name", None)
    try:
        if backend != "gymnasium":
            cls = ENVS.get(backend)
        elif isinstance(name, str) and name in ENVS:
            cls = ENVS.get(name)
        else:
            return False
    except KeyError:
        return False
    return bool(getattr(cls, "multi_agent", False))


def probe_agent_ids(env_cfg: Any) -> List[str]:
    """The agent ids of a multi-agent env config, from one env of it built here (and closed)."""
    backend = env_cfg.backend if env_cfg.backend != "gymnasium" else env_cfg.name
    cls = ENVS.get(backend)
    kwargs = cls.prepare(env_cfg) if hasattr(cls, "prepare") else {}
    env = cls(env_cfg.model_copy(update={"num_envs": 1}), **(kwargs or {}))
    try:
        return [str(a) for a in env.get_metadata().action_space.spaces]
    finally:
        env.close()


def policy_class_for(config: Any) -> type:
    """The policy class of a run: `MultiAgentPolicy` for a multi-agent env, else ``POLICIES[policy.type]``."""
    import rlightning.policy.algorithms  # noqa: F401 - registers the built-ins

    if env_is_multi_agent(config.env):
        return MultiAgentPolicy
    return POLICIES.get(config.policy.type)


def _split_meta(env_meta: EnvMeta, agents: Sequence[str], group: str) -> EnvMeta:
    obs_spaces = getattr(env_meta.observation_space, "spaces", None)
    act_spaces = getattr(env_meta.action_space, "spaces", None)
    first = agents[0]
    for a in agents[1:]:
        if obs_spaces[a] != obs_spaces[first] or act_spaces[a] != act_spaces[first]:
            raise ValueError(
                f"policy group {group!r} shares parameters between agents {first!r} and {a!r}, whose spaces differ "
                f"(observation {obs_spaces[first]} vs {obs_spaces[a]}, action {act_spaces[first]} vs {act_spaces[a]}); "
                "put agents with different spaces in different policy.agent_groups"
            )
    n = (env_meta.num_envs or 1) * len(agents)
    return EnvMeta(f"{env_meta.env_id}/{group}", act_spaces[first], obs_spaces[first], n)


class MultiAgentPolicy(BasePolicy):
    """One policy of type ``config.type`` per agent group (see the module docstring).

    Raises:
        KeyError: ``config.type`` is not a registered policy.
    """

    config_cls = PolicyConfig
    """Any algorithm's config: the groups' policies are of ``config.type``."""

    def __init__(self, config: PolicyConfig, role_type: PolicyRole = PolicyRole.TRAIN, worker_index: int = 0) -> None:
        super().__init__(config, role_type=role_type, worker_index=worker_index)
        import rlightning.policy.algorithms  # noqa: F401 - registers the built-ins

        self.inner_cls = POLICIES.get(config.type)
        self.groups: Dict[str, List[str]] = {}
        self.policies: Dict[str, BasePolicy] = {}

    @property
    def supported_action_spaces(self) -> Any:
        """Those of the groups' algorithm."""
        return getattr(self.inner_cls, "supported_action_spaces", None)

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg: PolicyConfig) -> Optional[Callable]:
        """The per-agent version of the algorithm's buffer post-process: GAE per agent (`MultiAgentGAE`) for
        ppo and a2c, n-step returns per agent (`MultiAgentNStep`) for DQN's ``n_step > 1``, None for the
        one-step off-policy learners (DQN, SAC, TD3), which read each agent's transitions as stored.

        Raises:
            ValueError: an algorithm whose buffer post-process has no per-agent version.
        """
        from rlightning.buffer.utils.utils import _GAEPostprocess
        from rlightning.policy.algorithms.nstep import NStepReturns

        inner_cls = POLICIES.get(policy_cfg.type)
        inner = inner_cls.buffer_postprocess_fn(policy_cfg)
        if isinstance(inner, _GAEPostprocess):
            return MultiAgentGAE(inner.gamma, inner.gae_lambda)
        if inner is None and inner_cls.learns_from_transitions:
            return None
        if isinstance(inner, NStepReturns) and inner_cls.learns_from_transitions:
            from rlightning.policy.multi_agent_nstep import MultiAgentNStep

            return MultiAgentNStep(inner.n, inner.gamma)
        raise ValueError(
            f"policy.type {policy_cfg.type!r} learns from the buffer postprocess {inner!r}, which has no per-agent "
            "version; multi-agent envs train with the algorithms that use GAE (ppo, a2c), n-step returns (dqn) "
            "or replay transitions (sac, td3)"
        )

    # ------------------------------------------------------------------ building

    def construct_network(self, env_meta: EnvMeta) -> None:
        """Build one policy of ``config.type`` per agent group.

        Raises:
            ValueError: not a multi-agent env (Dict spaces keyed by agent id), or bad ``policy.agent_groups``.
        """
        act_spaces = getattr(env_meta.action_space, "spaces", None)
        obs_spaces = getattr(env_meta.observation_space, "spaces", None)
        if not isinstance(act_spaces, Mapping) or not isinstance(obs_spaces, Mapping):
            raise ValueError(
                f"a multi-agent policy needs Dict action and observation spaces keyed by agent id, got "
                f"{env_meta.action_space!r} and {env_meta.observation_space!r}"
            )
        if list(act_spaces) != list(obs_spaces):
            raise ValueError(
                f"agents differ between action space {list(act_spaces)} and observation space {list(obs_spaces)}"
            )
        self.env_meta = env_meta
        self.groups = resolve_agent_groups(getattr(self.config, "agent_groups", None), list(act_spaces))
        for group, agents in self.groups.items():
            inner = self.inner_cls(
                self.config.model_copy(deep=True), role_type=self.role_type, worker_index=self.worker_index
            )
            inner.device = self.device
            inner.num_threads = self.num_threads
            if hasattr(self, "np_rng"):
                inner.np_rng = self.np_rng
            for name in ("allreduce_gradients", "allreduce_mean", "allreduce_sum"):
                setattr(inner, name, getattr(self, name))  # data-parallel ranks reduce through this worker
            inner.construct_network(_split_meta(env_meta, agents, group))
            if inner.env_meta is None:
                inner.env_meta = _split_meta(env_meta, agents, group)
            for name, module in inner.modules.items():
                self.register_module(f"{group}.{name}", module)
            self.policies[group] = inner
        inner_sync = getattr(self.inner_cls, "sync_module_names", None)
        if inner_sync is not None:  # e.g. DQN's target network stays with the learner
            self.sync_module_names = tuple(f"{g}.{name}" for g in self.groups for name in inner_sync)

    def setup_optimizer(self, optim_cfg: Any) -> None:
        """Each group's optimizers (registered here as ``<group>.<name>``)."""
        for group, inner in self.policies.items():
            inner.setup_optimizer(optim_cfg)
            for name, opt in inner.optimizers.items():
                self.register_optimizer(f"{group}.{name}", opt)

    # ------------------------------------------------------------------ acting

    def compute_actions(self, obs: Any, deterministic: bool = False) -> Dict[str, Dict[str, np.ndarray]]:
        """Every output per agent for ``{agent: [N, ...]}`` observations (one forward per group).

        Raises:
            TypeError: ``obs`` is not a dict.
            ValueError: agents missing or unknown (naming them and the env's agents).
        """
        if not isinstance(obs, Mapping):
            raise TypeError(
                f"a multi-agent policy acts on a dict of agent id -> observations, got {type(obs).__name__}"
            )
        agents = [a for g in self.groups.values() for a in g]
        if set(obs) != set(agents):
            raise ValueError(f"observations for agents {sorted(map(str, obs))}; the policy acts for {sorted(agents)}")
        out: Dict[str, Dict[str, np.ndarray]] = {}
        for group, members in self.groups.items():
            parts = [obs[a] for a in members]  # arrays, or dicts of them (a Dict space, e.g. with action_mask)
            sizes = [leading_rows(p) for p in parts]
            res = self.policies[group].compute_actions(concat_rows(parts), deterministic=deterministic)
            bounds = np.cumsum(sizes)[:-1]
            for key, value in res.items():
                pieces = np.split(np.asarray(value), bounds)
                slot = out.setdefault(key, {})
                for a, piece in zip(members, pieces):
                    slot[a] = piece
        return out

    #: `rollout_batch` answers multi-agent EnvRets (the per-step layout, and the engine's evaluation episodes).
    response_type = MultiAgentPolicyResponse

    def _observation_batch(self, env_rets: Sequence[Any]) -> Tuple[Dict[str, np.ndarray], List[int]]:
        """Every worker's ``{agent: [N, ...]}`` observations, concatenated per agent, and each worker's rows.

        Raises:
            TypeError: an item that is not an EnvRet, or whose observation is not a dict keyed by agent id.
            ValueError: an agent's rows that differ from the other agents'.
        """
        counts = []
        for i, env_ret in enumerate(env_rets):
            if not isinstance(env_ret, EnvRet):
                raise TypeError(f"rollout expects EnvRet items, got {type(env_ret).__name__} at position {i}")
            obs = env_ret.observation
            if not isinstance(obs, Mapping) or not obs:
                raise TypeError(
                    f"EnvRet {env_ret.env_id!r}: a multi-agent policy acts on a dict of agent id -> [num_envs, ...] "
                    f"observations, got {type(obs).__name__}"
                )
            rows = {str(a): int(np.shape(v)[0]) if np.ndim(v) else -1 for a, v in obs.items()}
            if len(set(rows.values())) != 1 or -1 in rows.values():
                raise ValueError(
                    f"EnvRet {env_ret.env_id!r}: every agent's observation needs the same leading num_envs "
                    f"dimension, got rows {rows}"
                )
            counts.append(next(iter(rows.values())))
        if len(env_rets) == 1:
            return dict(env_rets[0].observation), counts
        agents = list(env_rets[0].observation)
        return {a: np.concatenate([np.asarray(r.observation[a]) for r in env_rets]) for a in agents}, counts

    def _check_outputs(self, out: Dict[str, Any], total: int) -> None:
        for key, per_agent in out.items():
            for agent, value in per_agent.items():
                if np.shape(value)[:1] != (total,):
                    raise ValueError(
                        f"MultiAgentPolicy.compute_actions returned {key!r} of agent {agent!r} with shape "
                        f"{np.shape(value)}; every value needs the leading batch dim {total}"
                    )

    def _output_rows(self, out: Dict[str, Any], start: int, n: int) -> Dict[str, Any]:
        return {k: {a: v[start : start + n] for a, v in per_agent.items()} for k, per_agent in out.items()}

    # ------------------------------------------------------------------ learning

    def update_dataset(self, data: Any) -> None:
        """Give each group its agents' valid steps of sampled multi-agent data.

        Raises:
            TypeError: not a TensorDict.
            KeyError: data without the groups' agents (``agents.<id>.*`` keys).
            ValueError: a group has too few valid steps for its algorithm.
        """
        from tensordict import TensorDictBase

        from rlightning.types.multi_agent_record import agent_group_batch

        if not isinstance(data, TensorDictBase):
            raise TypeError(f"multi-agent update_dataset needs a TensorDict, got {type(data).__name__}")
        transitions = not self._on_policy()
        batches = {g: agent_group_batch(data, agents, transitions=transitions) for g, agents in self.groups.items()}
        for group, batch in batches.items():
            try:
                self.policies[group].update_dataset(batch)
            except ValueError as err:
                raise ValueError(f"policy group {group!r} (agents {self.groups[group]}): {err}") from None
        self.dataset = batches

    def _on_policy(self) -> bool:
        """True when the groups' algorithm learns from per-agent GAE (ppo, a2c); else from replay transitions."""
        return not self.inner_cls.learns_from_transitions

    def priority_update(self) -> Optional[Dict[str, Any]]:
        """Prioritized replay: one new priority per sampled row, the largest TD error of its agents' steps.

        Each group's learner gives a priority per agent-step (its ``_index`` and ``_shard`` are the
        sampled row's); a row the agents of several groups (or several agents of one group) acted in
        gets the largest. None when no group has anything new.
        """
        import torch

        updates = [u for u in (p.priority_update() for p in self.policies.values()) if u is not None]
        if not updates:
            return None
        index = torch.cat([torch.as_tensor(u["index"]).reshape(-1).long() for u in updates])
        shard = torch.cat([torch.as_tensor(u["shard"]).reshape(-1).long() for u in updates])
        priority = torch.cat([torch.as_tensor(u["priority"]).reshape(-1).float() for u in updates])
        pairs, inverse = torch.unique(torch.stack([shard, index], dim=1), dim=0, return_inverse=True)
        best = torch.full((pairs.shape[0],), float("-inf")).scatter_reduce(0, inverse, priority, reduce="amax")
        return {"index": pairs[:, 1], "shard": pairs[:, 0], "priority": best}

    def train(self) -> Dict[str, float]:
        """Train every group on its batch; one group's metrics as they are, several prefixed ``<group>/``."""
        metrics: Dict[str, float] = {}
        for group, inner in self.policies.items():
            got = inner.train()
            if len(self.policies) == 1:
                metrics.update(got)
            else:
                metrics.update({f"{group}/{k}": v for k, v in got.items()})
        self.update_count = sum(p.update_count for p in self.policies.values())
        self.train_calls += 1
        self._last_metrics = metrics
        return metrics

    def set_schedule(self, total_iterations: int, total_env_steps: Optional[int] = None) -> None:
        """The run's length, for every group (learning-rate annealing)."""
        super().set_schedule(total_iterations, total_env_steps)
        for inner in self.policies.values():
            inner.set_schedule(total_iterations, total_env_steps)

    def set_env_steps(self, env_steps: int) -> None:
        """The run's env steps so far, for every group."""
        super().set_env_steps(env_steps)
        for inner in self.policies.values():
            inner.set_env_steps(env_steps)

    def set_deterministic(self, deterministic: bool = True) -> None:
        """Every group acts deterministically (or not)."""
        super().set_deterministic(deterministic)
        for inner in self.policies.values():
            inner.set_deterministic(deterministic)

    def set_hyperparameters(self, values: Dict[str, float]) -> Dict[str, float]:
        """Change config values of every group from the next ``train()`` on (``Run.set``)."""
        out = super().set_hyperparameters(values)
        for inner in self.policies.values():
            inner.set_hyperparameters(values)
        return out

    def setup_resources(self, num_cpus: float = 1.0, num_gpus: float = 0.0, gpu_ids: Optional[List[int]] = None) -> str:
        """As `BasePolicy.setup_resources`; the groups' policies follow the device."""
        device = super().setup_resources(num_cpus=num_cpus, num_gpus=num_gpus, gpu_ids=gpu_ids)
        for inner in getattr(self, "policies", {}).values():
            inner.device = self.device
        return device

    def extra_checkpoint_state(self) -> Dict[str, Any]:
        """Each group's extra state, by group."""
        return {g: p.extra_checkpoint_state() for g, p in self.policies.items()}

    def load_extra_checkpoint_state(self, extra: Dict[str, Any]) -> None:
        """Restore each group's extra state."""
        for g, p in self.policies.items():
            if isinstance(extra, dict) and g in extra:
                p.load_extra_checkpoint_state(extra[g])


class MultiAgentGAE:
    """GAE per agent on stored multi-agent episodes (``agents.<id>.value``, ``next_agents.<id>.*``).

    An agent's episode ends at its own ``terminated`` (no bootstrap) or ``truncated`` step (bootstrapped
    with ``next_agents.<id>.value`` when present), or where its env's episode ends. Steps after an agent
    finished get an advantage too, but their ``valid`` mask keeps them out of every batch.
    Writes ``agents.<id>.advantage`` and ``agents.<id>.return``.
    """

    def __init__(self, gamma: float, gae_lambda: float) -> None:
        self.gamma = float(gamma)
        self.gae_lambda = float(gae_lambda)

    def __repr__(self) -> str:
        return f"MultiAgentGAE(gamma={self.gamma}, gae_lambda={self.gae_lambda})"

    def batched(self, episodes: Any, lengths: Any, bootstrap_value: Optional[Any] = None) -> Any:
        """Advantages and returns of several concatenated episodes (``lengths``: their lengths).

        Raises:
            KeyError: an agent without ``value`` or ``reward`` (naming the keys present).
        """
        import torch

        from rlightning.types.multi_agent_record import stored_agent_ids

        agents = stored_agent_ids(episodes)
        if not agents:
            raise KeyError(
                f"MultiAgentGAE needs multi-agent data (agents.<id>.valid keys); got {sorted(episodes.keys())}"
            )
        n = int(episodes.batch_size[0])
        ends = np.zeros(n, dtype=bool)
        ends[np.cumsum(np.asarray(lengths, dtype=np.int64)) - 1] = True
        for a in agents:
            need = [f"agents.{a}.value", f"next_agents.{a}.reward", f"next_agents.{a}.terminated"]
            missing = [k for k in need if k not in episodes.keys()]
            if missing:
                raise KeyError(f"MultiAgentGAE: agent {a!r} lacks {missing}; the data has {sorted(episodes.keys())}")
            value = episodes.get(need[0]).reshape(n, -1)[:, 0].double().numpy()
            reward = episodes.get(need[1]).reshape(n).double().numpy()
            term = episodes.get(need[2]).reshape(n).numpy().astype(bool)
            trunc_key = f"next_agents.{a}.truncated"
            trunc = episodes.get(trunc_key).reshape(n).numpy().astype(bool) if trunc_key in episodes.keys() else ends
            boot_key = f"next_agents.{a}.value"
            boot = (
                episodes.get(boot_key).reshape(n, -1)[:, 0].double().numpy()
                if boot_key in episodes.keys()
                else np.zeros(n)
            )
            cut = term | trunc | ends
            next_value = np.empty(n)
            next_value[:-1] = value[1:]
            next_value[-1] = 0.0
            next_value = np.where(cut, boot, next_value) * (~term)
            delta = reward + self.gamma * next_value - value
            adv = np.empty(n)
            last = 0.0
            decay = self.gamma * self.gae_lambda
            for i in range(n - 1, -1, -1):
                last = delta[i] + (0.0 if cut[i] else decay * last)
                adv[i] = last
            episodes.set(f"agents.{a}.advantage", torch.from_numpy(adv.astype(np.float32)))
            episodes.set(f"agents.{a}.return", torch.from_numpy((adv + value).astype(np.float32)))
        return episodes

    def __call__(self, episode: Any, bootstrap_value: Optional[Any] = None) -> Any:
        """One episode (see `batched`)."""
        import torch

        return self.batched(episode, torch.tensor([episode.batch_size[0]]), bootstrap_value)
