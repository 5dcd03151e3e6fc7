"""Environment-side data types: `EnvMeta`, `EnvRet`, `MultiAgentEnvRet`.

An `EnvRet` is what an env worker sends after ``reset()`` or ``step()``: the
observation the policy must act on, and the reward and done flags produced by
the *previous* action (hence ``last_``). A vectorised env worker sends one
`EnvRet` for all its sub-environments: ``observation`` is ``[num_envs, ...]``
and the ``last_*`` fields are arrays of length ``num_envs``.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Optional, Tuple, Union

from rlightning.types.convert import cuda_fn, map_arrays, sent_latency, to_cpu, to_numpy


@dataclass
class EnvMeta:
    """Environment metadata container.

    Attributes:
        env_id: Unique identifier for the environment (one per env worker).
        action_space: Gymnasium action space of one sub-environment.
        observation_space: Gymnasium observation space of one sub-environment.
        num_envs: Number of vectorised sub-environments in the worker.
    """

    env_id: str = None
    action_space: Optional[Any] = None
    observation_space: Optional[Any] = None
    num_envs: Optional[int] = None


_ENV_RET_INTERNAL = ("env_id", "ts_env_sent_ns")


@dataclass
class EnvRet:
    """Environment return data structure for single-agent interactions.

    Attributes:
        env_id: Unique identifier for the environment instance.
        observation: Observation after the environment step/reset.
        last_reward: Reward received after the last step.
        last_terminated: Whether the episode terminated after the last step.
        last_truncated: Whether the episode was truncated after the last step.
        info: Additional info from the environment.
        _extra: Extra fields for extensibility, flattened by ``to_dict``.
        ts_env_sent_ns: Timestamp (ns) when this EnvRet was produced and sent.
    """

    env_id: str
    observation: Any
    last_reward: float = 0.0
    last_terminated: bool = False
    last_truncated: bool = False
    info: Dict[str, Any] = field(default_factory=dict)
    _extra: Dict[str, Any] = field(default_factory=dict)
    ts_env_sent_ns: int = field(default_factory=time.time_ns)

    @property
    def last_info(self) -> Dict[str, Any]:
        """Alias of ``info``: the info dict of the last step."""
        return self.info

    @classmethod
    def fields(cls) -> Tuple:
        """Return the serialisable field names (no ``env_id``, timestamps or private fields)."""
        return tuple(
            f.name for f in dataclasses.fields(cls) if not f.name.startswith("_") and f.name not in _ENV_RET_INTERNAL
        )

    @classmethod
    def get_defaults(cls) -> Dict[str, Any]:
        """Return default values for the serialisable fields that have one."""
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name not in cls.fields():
                continue
            if f.default is not dataclasses.MISSING:
                out[f.name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                out[f.name] = f.default_factory()
        return out

    def to_dict(self) -> Dict[str, Any]:
        """Convert to a dict without ``env_id`` and ``ts_env_sent_ns``, ``_extra`` flattened in.

        Raises:
            KeyError: an ``_extra`` key clashes with a field name.
        """
        out = {name: getattr(self, name) for name in self.fields()}
        for key, value in self._extra.items():
            if key in out or key in _ENV_RET_INTERNAL:
                raise KeyError(
                    f"EnvRet._extra key {key!r} clashes with a field of {type(self).__name__}; "
                    f"rename it (fields: {', '.join(self.fields())})"
                )
            out[key] = value
        return out

    def _convert(self, fn) -> EnvRet:
        for name in ("observation", "last_reward", "last_terminated", "last_truncated", "info", "_extra"):
            setattr(self, name, map_arrays(getattr(self, name), fn))
        return self

    def cpu(self) -> EnvRet:
        """Move all tensor attributes to CPU (nested dicts included)."""
        return self._convert(to_cpu)

    def cuda(self, device: Optional[Union[str, int]] = None) -> EnvRet:
        """Move all tensor and array attributes to CUDA (default device ``cuda``)."""
        return self._convert(cuda_fn(device))

    def numpy(self) -> EnvRet:
        """Convert all tensor attributes to numpy arrays."""
        return self._convert(to_numpy)

    def mark_env_sent(self) -> EnvRet:
        """Record now as the time this EnvRet is sent; returns self."""
        self.ts_env_sent_ns = time.time_ns()
        return self

    def compute_sent_latency(self, now_ns: Optional[int] = None) -> float:
        """Seconds from the env-sent timestamp to ``now_ns`` (default: now); 0.0 if missing or invalid."""
        return sent_latency(self.ts_env_sent_ns, now_ns)


@dataclass
class MultiAgentEnvRet(EnvRet):
    """Environment return for multi-agent interactions.

    ``observation``, ``last_reward``, ``last_terminated`` and ``last_truncated``
    are dicts keyed by agent id. The episode is over when every agent is done
    (``all_done``).
    """

    last_reward: Dict[str, float] = 0.0
    """Per agent id, the reward received after the last step."""
    last_terminated: Dict[str, bool] = False
    """Per agent id, whether the agent has terminated after the last step."""
    last_truncated: Dict[str, bool] = False
    """Per agent id, whether the agent has been truncated after the last step."""

    @property
    def agent_ids(self) -> Tuple[str, ...]:
        """The agent ids present in the observation."""
        if isinstance(self.observation, dict):
            return tuple(self.observation.keys())
        return ()

    def all_done(self) -> bool:
        """True when every agent is terminated or truncated."""
        term = self.last_terminated
        trunc = self.last_truncated
        if not isinstance(term, dict):
            return bool(term) or bool(trunc)
        agents = set(term) | set(trunc if isinstance(trunc, dict) else {})
        if not agents:
            return False
        return all(bool(term.get(a, False)) or bool(trunc.get(a, False)) for a in agents)
