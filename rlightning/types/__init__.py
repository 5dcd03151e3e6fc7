"""Types module for reinforcement learning data structures.

Available types:

- `BatchedData`: container for batched environment or policy data.
- `EnvRet`: environment return data structure.
- `MultiAgentEnvRet`: multi-agent environment return.
- `PolicyResponse`: policy action response structure.
- `MultiAgentPolicyResponse`: multi-agent policy response.
- `EnvMeta`: environment metadata container.

This package never imports Ray.
"""

from rlightning.types.batched import BatchedData, is_object_ref
from rlightning.types.env_types import EnvMeta, EnvRet, MultiAgentEnvRet
from rlightning.types.policy_types import MultiAgentPolicyResponse, PolicyResponse

__all__ = [
    "BatchedData",
    "EnvMeta",
    "EnvRet",
    "MultiAgentEnvRet",
    "MultiAgentPolicyResponse",
    "PolicyResponse",
    "is_object_ref",
]
