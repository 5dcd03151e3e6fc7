"""Types module for reinforcement learning data structures.

Available types:

- `BatchedData`: container for batched environment or policy data.
- `EnvRet`: environment return data structure.
- `MultiAgentEnvRet`: multi-agent environment return.
- `PolicyResponse`: policy action response structure.
- `MultiAgentPolicyResponse`: multi-agent policy response.
- `EnvMeta`: environment metadata container.
- `step_to_record`, `validate_record` and the record key names (`rlightning.types.record`):
  the rollout record, one TensorDict per vector step or chunk.

This package never imports Ray.
"""

from rlightning.types.batched import BatchedData, is_object_ref
from rlightning.types.env_types import EnvMeta, EnvRet, MultiAgentEnvRet
from rlightning.types.policy_types import MultiAgentPolicyResponse, PolicyResponse
from rlightning.types.record import (
    ACTION,
    DONE,
    ENV_ID,
    EPISODE_ID,
    NEXT,
    OBS,
    RECORD_KEYS,
    REWARD,
    TERMINATED,
    TRUNCATED,
    VALID,
    RecordKeyError,
    record_env_id,
    record_from_steps,
    step_to_record,
    validate_record,
)

__all__ = [
    "ACTION",
    "DONE",
    "ENV_ID",
    "EPISODE_ID",
    "NEXT",
    "OBS",
    "RECORD_KEYS",
    "REWARD",
    "TERMINATED",
    "TRUNCATED",
    "VALID",
    "BatchedData",
    "EnvMeta",
    "EnvRet",
    "MultiAgentEnvRet",
    "MultiAgentPolicyResponse",
    "PolicyResponse",
    "RecordKeyError",
    "is_object_ref",
    "record_env_id",
    "record_from_steps",
    "step_to_record",
    "validate_record",
]
