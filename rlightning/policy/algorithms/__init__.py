"""Built-in algorithms, registered in ``POLICIES`` as ``ppo``, ``sac`` and ``dqn``."""

from rlightning.policy.algorithms.dqn import DQNPolicy
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.algorithms.sac import SACPolicy

__all__ = ["DQNPolicy", "PPOPolicy", "SACPolicy"]
