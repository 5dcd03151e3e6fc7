"""Policy-side data types: `PolicyResponse`, `MultiAgentPolicyResponse`.

A `PolicyResponse` answers one `EnvRet` (for a vectorised env, one response
carries the batch of actions). Besides ``action`` it carries whatever the
policy wants stored with the transition (``log_prob``, ``value``, ...), the
``weight_version`` the action was computed with, and timestamps.
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Dict, Optional, Union

from rlightning.types.convert import cuda_fn, map_arrays, sent_latency, to_cpu, to_numpy

# Attributes that describe the response rather than data to store.
POLICY_META_KEYS = ("env_id", "ts_env_sent_ns", "ts_policy_sent_ns", "weight_version")


class PolicyResponse(SimpleNamespace):
    """Policy response container for single-agent interactions.

    Args:
        env_id: Environment identifier this response is for.
        **data: The response's attributes (``action`` and any extras).

    Attributes:
        env_id: Environment identifier this response is for.
    """

    def __init__(self, env_id: str, **data: Any) -> None:
        super().__init__(env_id=env_id, **data)

    def __reduce__(self) -> tuple:
        # SimpleNamespace pickles as ``cls()`` plus state; ``env_id`` is a required argument here.
        state = dict(vars(self))
        return (type(self), (state.pop("env_id", None),), state)

    def to_dict(self) -> Dict[str, Any]:
        """Data attributes as a dict, without ids, timestamps and the weight version."""
        return {k: v for k, v in vars(self).items() if k not in POLICY_META_KEYS}

    def _convert(self, fn) -> PolicyResponse:
        for key, value in list(vars(self).items()):
            if key not in POLICY_META_KEYS:
                setattr(self, key, map_arrays(value, fn))
        return self

    def cpu(self) -> PolicyResponse:
        """Move all tensor attributes to CPU (nested dicts included)."""
        return self._convert(to_cpu)

    def cuda(self, device: Optional[Union[str, int]] = None) -> PolicyResponse:
        """Move all tensor and array attributes to CUDA (default device ``cuda``)."""
        return self._convert(cuda_fn(device))

    def numpy(self) -> PolicyResponse:
        """Convert all tensor attributes to numpy arrays."""
        return self._convert(to_numpy)

    def mark_policy_sent(self) -> PolicyResponse:
        """Record now as the time the policy sends this response; returns self."""
        self.ts_policy_sent_ns = time.time_ns()
        return self

    def compute_sent_latency(self, now_ns: Optional[int] = None) -> float:
        """Seconds from the send timestamp to ``now_ns`` (default: now); 0.0 if missing or invalid.

        Uses the policy-sent stamp when set (policy -> buffer latency), else
        the env-sent stamp copied from the EnvRet (env -> here).
        """
        ts = getattr(self, "ts_policy_sent_ns", None)
        if ts is None:
            ts = getattr(self, "ts_env_sent_ns", None)
        return sent_latency(ts, now_ns)

    @staticmethod
    def make_example(action_space: Any, env_id: Optional[str] = None, **data: Any) -> PolicyResponse:
        """Create a response with an action sampled from ``action_space``."""
        return PolicyResponse(env_id=env_id, action=action_space.sample(), **data)


class MultiAgentPolicyResponse(PolicyResponse):
    """Policy response for multi-agent interactions: ``action`` is a dict keyed by agent id."""

    @staticmethod
    def make_example(
        action_spaces: Dict[str, Any], env_id: Optional[str] = None, **data: Any
    ) -> MultiAgentPolicyResponse:
        """Create a response with one sampled action for every agent in ``action_spaces``."""
        if not isinstance(action_spaces, dict):
            raise TypeError(
                "MultiAgentPolicyResponse.make_example expects a dict of agent id -> action space, "
                f"got {type(action_spaces).__name__}"
            )
        action = {agent: space.sample() for agent, space in action_spaces.items()}
        return MultiAgentPolicyResponse(env_id=env_id, action=action, **data)
