"""Built-in algorithms, registered in ``POLICIES``: ppo, a2c, sac, dqn, td3, appo and impala; offline: bc, td3_bc,
cql, discrete_cql, iql and discrete_iql."""

from rlightning.policy.algorithms.a2c import A2CConfig, A2CPolicy
from rlightning.policy.algorithms.appo import APPOConfig, APPOPolicy, IMPALAConfig, IMPALAPolicy
from rlightning.policy.algorithms.bc import BCConfig, BCPolicy
from rlightning.policy.algorithms.cql import CQLConfig, CQLPolicy, DiscreteCQLConfig, DiscreteCQLPolicy
from rlightning.policy.algorithms.dqn import DQNConfig, DQNPolicy
from rlightning.policy.algorithms.iql import DiscreteIQLConfig, DiscreteIQLPolicy, IQLConfig, IQLPolicy
from rlightning.policy.algorithms.ppo import PPOConfig, PPOPolicy
from rlightning.policy.algorithms.sac import SACConfig, SACPolicy
from rlightning.policy.algorithms.td3 import TD3Config, TD3Policy
from rlightning.policy.algorithms.td3_bc import TD3BCConfig, TD3BCPolicy

__all__ = [
    "A2CConfig",
    "A2CPolicy",
    "APPOConfig",
    "APPOPolicy",
    "BCConfig",
    "BCPolicy",
    "CQLConfig",
    "CQLPolicy",
    "DQNConfig",
    "DQNPolicy",
    "DiscreteCQLConfig",
    "DiscreteCQLPolicy",
    "DiscreteIQLConfig",
    "DiscreteIQLPolicy",
    "IMPALAConfig",
    "IMPALAPolicy",
    "IQLConfig",
    "IQLPolicy",
    "PPOConfig",
    "PPOPolicy",
    "SACConfig",
    "SACPolicy",
    "TD3Config",
    "TD3BCConfig",
    "TD3BCPolicy",
    "TD3Policy",
]
