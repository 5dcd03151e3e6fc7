"""Built-in algorithms, registered in ``POLICIES`` as ``ppo``, ``sac`` and ``dqn``."""

from rlightning.policy.algorithms.dqn import DQNConfig, DQNPolicy
from rlightning.policy.algorithms.ppo import PPOConfig, PPOPolicy
from rlightning.policy.algorithms.sac import SACConfig, SACPolicy

__all__ = ["DQNConfig", "DQNPolicy", "PPOConfig", "PPOPolicy", "SACConfig", "SACPolicy"]
