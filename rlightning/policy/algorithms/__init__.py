"""Built-in algorithms, registered in ``POLICIES``: ppo, a2c, sac, dqn, td3, appo and impala."""

from rlightning.policy.algorithms.a2c import A2CConfig, A2CPolicy
from rlightning.policy.algorithms.appo import APPOConfig, APPOPolicy, IMPALAConfig, IMPALAPolicy
from rlightning.policy.algorithms.dqn import DQNConfig, DQNPolicy
from rlightning.policy.algorithms.ppo import PPOConfig, PPOPolicy
from rlightning.policy.algorithms.sac import SACConfig, SACPolicy
from rlightning.policy.algorithms.td3 import TD3Config, TD3Policy

__all__ = [
    "A2CConfig",
    "A2CPolicy",
    "APPOConfig",
    "APPOPolicy",
    "DQNConfig",
    "DQNPolicy",
    "IMPALAConfig",
    "IMPALAPolicy",
    "PPOConfig",
    "PPOPolicy",
    "SACConfig",
    "SACPolicy",
    "TD3Config",
    "TD3Policy",
]
