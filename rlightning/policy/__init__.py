"""Policies: `BasePolicy`, `PolicyRole`, `PolicyGroup`, weight sync and the built-in algorithms.

Importing this package registers the built-in algorithms in ``POLICIES``.
"""

from rlightning.policy.algorithms import (  # registers them
    DQNConfig,
    DQNPolicy,
    PPOConfig,
    PPOPolicy,
    SACConfig,
    SACPolicy,
)
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.policy_group import PolicyGroup

__all__ = [
    "BasePolicy",
    "DQNConfig",
    "DQNPolicy",
    "PPOConfig",
    "PPOPolicy",
    "PolicyGroup",
    "PolicyRole",
    "SACConfig",
    "SACPolicy",
]
