"""Built-in algorithms, registered in ``POLICIES`` as ``ppo``, ``a2c``, ``sac``, ``dqn`` and ``td3``."""

from rlightning.policy.algorithms.a2c import A2CConfig, A2CPolicy
from rlightning.policy.algorithms.dqn import DQNConfig, DQNPolicy
from rlightning.policy.algorithms.ppo import PPOConfig, PPOPolicy
from rlightning.policy.algorithms.sac import SACConfig, SACPolicy
from rlightning.policy.algorithms.td3 import TD3Config, TD3Policy

__all__ = [
    "A2CConfig",
    "A2CPolicy",
    "DQNConfig",
    "DQNPolicy",
    "PPOConfig",
    "PPOPolicy",
    "SACConfig",
    "SACPolicy",
    "TD3Config",
    "TD3Policy",
]
