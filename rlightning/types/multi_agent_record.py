"""Multi-agent records: the rollout record of `rlightning.types.record`, nested per agent.

A multi-agent env worker (``MultiAgentEnvRet``: dicts keyed by agent id) gives a
``[N]`` or ``[N, T]`` TensorDict with the same ``next`` convention, its
per-agent data under ``agents.<agent_id>``::

    agents.<id>.obs          the observation agent <id> acted on
    agents.<id>.action       its action, and the policy's extras (log_prob, value, ...)
    agents.<id>.valid        bool: the agent acted on that observation (it was still in the
                             episode, and the step is not an autoreset step)
    next.agents.<id>.obs     its next observation
    next.agents.<id>.reward  float32, and bool terminated / truncated / done (done = terminated | truncated)
    next.agents.<id>.value   optional: the value of its next observation (the bootstrap)
    valid, episode_id        per sub-env, as in a single-agent record
    next.reward              the team's reward (summed over agents)
    next.terminated / truncated / done
                             per sub-env: done once every agent is done

Storages cut episodes on the sub-env flags, and store every leaf under its
dotted name (``agents.agent_0.obs``, ``next_agents.agent_0.reward``): the
buffer needs nothing multi-agent. The per-agent ``valid`` masks travel with the
data; `agent_group_batch` keeps only the valid steps of a group's agents, so an
agent that finished early (or a step after it) never reaches a loss.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    "AGENTS",
    "AGENT_KEYS",
    "AGENT_NEXT_KEYS",
    "MULTI_AGENT_RECORD_KEYS",
    "agent_group_batch",
    "check_multi_agent_record",
    "is_multi_agent_record",
    "multi_agent_arrays_to_record",
    "record_agent_ids",
    "stored_agent_ids",
]

AGENTS = "agents"
#: Keys every agent has at the root of its nest, and under ``next``.
AGENT_KEYS = ("obs", "action", "valid")
AGENT_NEXT_KEYS = ("obs", "reward", "terminated", "truncated", "done")
#: Keys a multi-agent record has (``agents`` stands for every agent's nest).
MULTI_AGENT_RECORD_KEYS = (
    (AGENTS,),
    ("next", AGENTS),
    ("next", "reward"),
    ("next", "terminated"),
    ("next", "truncated"),
    ("next", "done"),
)


def is_multi_agent_record(td: Any) -> bool:
    """True when a record has an ``agents`` nest (the multi-agent layout)."""
    try:
        return AGENTS in td.keys()
    except Exception:  # noqa: BLE001 - not a TensorDict: validate_record reports it
        return False


def record_agent_ids(td: Any) -> List[str]:
    """The agent ids of a multi-agent record, in its order."""
    return [str(k) for k in td.get(AGENTS).keys()]


def _shape(shape: Sequence[int]) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def check_multi_agent_record(td: Any, spec: Dict[Tuple[str, ...], Tuple[Tuple[int, ...], Any]], space: Any, name: str):
    """The per-agent checks of `rlightning.types.record.validate_record` on a multi-agent record.

    Args:
        td: The record.
        spec: Its leaves' per-row (shape, dtype), as `validate_record` found them.
        space: The env's observation space (a Dict keyed by agent id), or None.
        name: What to call the record in messages.

    Raises:
        ValueError: agents that differ from the space's or from ``next.agents``, a missing per-agent key,
            per-agent flags or masks of the wrong dtype or shape, or observations that differ from the space.
        TypeError: ``agents`` is not a nest of TensorDicts.
    """
    import torch
    from tensordict import TensorDictBase

    nest = td.get(AGENTS)
    nxt = td.get(("next", AGENTS), None)
    if not isinstance(nest, TensorDictBase) or not isinstance(nxt, TensorDictBase):
        raise TypeError(f"{name}: 'agents' and 'next.agents' must hold one TensorDict per agent id")
    agents = [str(a) for a in nest.keys()]
    if sorted(agents) != sorted(map(str, nxt.keys())):
        raise ValueError(
            f"{name}: agents {sorted(agents)} under 'agents' but {sorted(map(str, nxt.keys()))} under 'next.agents'"
        )
    subspaces = getattr(space, "spaces", None) if space is not None else None
    if isinstance(subspaces, Mapping) and sorted(map(str, subspaces)) != sorted(agents):
        raise ValueError(
            f"{name} has agents {sorted(agents)}, but the env's agents are {sorted(map(str, subspaces))} "
            "(the keys of its observation space)"
        )
    fixed = {"reward": torch.float32, "terminated": torch.bool, "truncated": torch.bool, "done": torch.bool}
    for a in agents:
        for key in AGENT_KEYS:
            if (AGENTS, a, key) not in spec and not any(k[:3] == (AGENTS, a, key) for k in spec):
                raise ValueError(f"{name}: agent {a!r} has no 'agents.{a}.{key}' key; every agent needs {AGENT_KEYS}")
        for key in AGENT_NEXT_KEYS:
            if ("next", AGENTS, a, key) not in spec and not any(k[:4] == ("next", AGENTS, a, key) for k in spec):
                raise ValueError(
                    f"{name}: agent {a!r} has no 'next.agents.{a}.{key}' key; every agent needs {AGENT_NEXT_KEYS}"
                )
        checks = [((AGENTS, a, "valid"), torch.bool)] + [(("next", AGENTS, a, k), d) for k, d in fixed.items()]
        for key, dtype in checks:
            shape, got = spec[key]
            if shape != () or got != dtype:
                raise ValueError(
                    f"{name} key {'.'.join(key)!r} has per-row shape {_shape(shape)} and dtype "
                    f"{str(got).replace('torch.', '')}, expected () and {str(dtype).replace('torch.', '')}"
                )
        flags = nxt.get(a)
        if not torch.equal(flags.get("done"), flags.get("terminated") | flags.get("truncated")):
            raise ValueError(f"{name} key 'next.agents.{a}.done' must equal its terminated | truncated")
        obs_keys = sorted(k for k in spec if k[:3] == (AGENTS, a, "obs"))
        for key in obs_keys:
            nkey = ("next",) + key
            if spec.get(nkey) != spec[key]:
                raise ValueError(
                    f"{name} key {'.'.join(nkey)!r} does not match {'.'.join(key)!r} in per-row shape and dtype"
                )
        sub = subspaces.get(a) if isinstance(subspaces, Mapping) else None
        if sub is not None:
            _check_agent_space(spec, a, sub, name)


def _check_agent_space(spec: Dict, agent: str, space: Any, name: str) -> None:
    import torch

    from rlightning.types.record_keys import space_spec

    want = space_spec(space, (AGENTS, agent, "obs"))
    if want is None:
        return
    got = {k: v for k, v in spec.items() if k[:3] == (AGENTS, agent, "obs")}
    if set(got) != set(want):
        raise ValueError(
            f"{name}: agent {agent!r} observation keys {sorted('.'.join(k) for k in got)} do not match its space "
            f"{space!r}"
        )
    for key, (shape, np_dtype) in want.items():
        torch_dtype = torch.from_numpy(np.zeros(0, dtype=np_dtype)).dtype
        if got[key] != (shape, torch_dtype):
            g_shape, g_dtype = got[key]
            raise ValueError(
                f"{name} key {'.'.join(key)!r} has per-row shape {_shape(g_shape)} and dtype "
                f"{str(g_dtype).replace('torch.', '')}, expected {_shape(shape)} and {np_dtype} (agent {agent!r}'s "
                "observation space)"
            )


def _tensors(obs: Any) -> Any:
    import torch

    return {k: _tensors(v) for k, v in obs.items()} if isinstance(obs, dict) else torch.from_numpy(obs)


def _steps(obs: Any, sl: slice) -> Any:
    return {k: _steps(v, sl) for k, v in obs.items()} if isinstance(obs, dict) else obs[:, sl]


def multi_agent_arrays_to_record(arrays: Dict[str, Any], env_id: str) -> Any:
    """The ``[N, T]`` record TensorDict over the arrays of `MultiAgentRecordWriter.finish`, without a copy."""
    import warnings

    import torch
    from tensordict import TensorDict

    agents = arrays[AGENTS]
    first = next(iter(agents.values()))
    n, t = first["valid"].shape
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # read-only arrays from the object store
        root: Dict[str, Any] = {AGENTS: {}}
        nxt: Dict[str, Any] = {AGENTS: {}}
        for a, sub in agents.items():
            obs = _tensors(sub["obs"])  # an agent's Dict observation (e.g. with its action_mask) stays nested
            mine = {k: torch.from_numpy(v) for k, v in sub.items() if k not in AGENT_NEXT_KEYS + ("next_value",)}
            mine["obs"] = _steps(obs, slice(0, t))
            root[AGENTS][a] = mine
            nx = {k: torch.from_numpy(sub[k]) for k in AGENT_NEXT_KEYS if k != "obs"}
            nx["obs"] = _steps(obs, slice(1, t + 1))
            if "next_value" in sub:
                nx["value"] = torch.from_numpy(sub["next_value"])
            nxt[AGENTS][a] = nx
        for k in ("episode_id", "valid"):
            root[k] = torch.from_numpy(arrays[k])
        for k in ("reward", "terminated", "truncated", "done"):
            nxt[k] = torch.from_numpy(arrays[k])
        root["next"] = nxt
    td = TensorDict(root, batch_size=[n, t])
    td.set_non_tensor("env_id", env_id)
    return td


# ---------------------------------------------------------------------- stored data -> one batch per policy group


def stored_agent_ids(data: Any) -> List[str]:
    """The agent ids present in sampled (stored, flat-keyed) multi-agent data."""
    out: List[str] = []
    for key in data.keys():
        if isinstance(key, str) and key.startswith(AGENTS + ".") and key.endswith(".valid"):
            out.append(key[len(AGENTS) + 1 : -len(".valid")])
    return out


def agent_group_batch(
    data: Any, agents: Sequence[str], keys: Optional[Sequence[str]] = None, transitions: bool = False
) -> Any:
    """One flat TensorDict of a policy group: its agents' valid steps of sampled multi-agent data, stacked.

    Args:
        data: A sampled TensorDict ``[B]`` with the stored names (``agents.<id>.<key>``).
        agents: The group's agent ids.
        keys: The per-agent keys to take (None: every key the first agent has).
        transitions: Also each agent's ``next`` leaves under the names a single-agent replay sample
            has (``next_agents.<id>.obs`` -> ``next_obs``, ``next_agents.<id>.reward`` -> ``reward``,
            ``terminated``, ...), and the sample's per-row keys (``_index``, ``_shard``, ``_weight``
            of a prioritized draw) repeated for every agent, with ``_row``: the row of ``data`` each
            agent-step came from. This is what the off-policy learners (DQN, SAC, TD3) read.

    Returns:
        A TensorDict ``[M]`` (M = the valid agent-steps) with the per-agent keys at the root
        (``obs``, ``action``, ``advantage``, ...).

    Raises:
        KeyError: an agent that has no data (the agents in the data are named).
    """
    import torch
    from tensordict import TensorDict

    present = stored_agent_ids(data)
    missing = [a for a in agents if a not in present]
    if missing:
        raise KeyError(f"multi-agent data has no agent(s) {missing}; it has {present}")
    prefix = f"{AGENTS}.{agents[0]}."
    if keys is None:
        keys = [k[len(prefix) :] for k in data.keys() if isinstance(k, str) and k.startswith(prefix)]
    masks = [data.get(f"{AGENTS}.{a}.valid").reshape(-1).bool() for a in agents]
    mask = torch.cat(masks)
    columns = {key: [f"{AGENTS}.{a}.{key}" for a in agents] for key in keys}
    repeated: Dict[str, torch.Tensor] = {}
    if transitions:
        from rlightning.types.stored_names import stored_name  # here: record.py imports this module

        next_prefix = f"next_{AGENTS}.{agents[0]}."
        for name in data.keys():
            if isinstance(name, str) and name.startswith(next_prefix):
                leaf = name[len(next_prefix) :]
                target = stored_name(("next",) + tuple(leaf.split(".")))
                columns[target] = [f"next_{AGENTS}.{a}.{leaf}" for a in agents]
            elif isinstance(name, str) and name.startswith("_"):
                repeated[name] = data.get(name)
        rows = int(data.batch_size.numel())
        repeated["_row"] = torch.arange(rows).reshape(data.batch_size)
    out = {}
    for key, names in columns.items():
        parts = [data.get(n) for n in names]
        flat = [p.reshape((-1,) + tuple(p.shape[data.batch_dims :])) for p in parts]
        out[key] = torch.cat(flat)[mask]
    for key, value in repeated.items():
        flat = value.reshape((-1,) + tuple(value.shape[data.batch_dims :]))
        out[key] = torch.cat([flat] * len(agents))[mask]
    return TensorDict(out, batch_size=[int(mask.sum())])
