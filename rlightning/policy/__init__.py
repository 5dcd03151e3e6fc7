"""Policies: `BasePolicy`, `PolicyRole`, `PolicyGroup`, weight sync and the built-in algorithms.

Importing this package registers the built-in algorithms in ``POLICIES``.
"""

from rlightning.policy.algorithms import DQNPolicy, PPOPolicy, SACPolicy  # registers them
from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.policy.policy_group import PolicyGroup

__all__ = ["BasePolicy", "DQNPolicy", "PPOPolicy", "PolicyGroup", "PolicyRole", "SACPolicy"]
