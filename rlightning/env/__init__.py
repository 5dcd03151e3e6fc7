"""The acting side: `BaseEnv`, the gymnasium backend, the built-in multi-agent env, `RolloutWorker`, `EnvGroup`.

Importing this package registers the built-in envs in ``ENVS``:
``"gymnasium"`` (`GymnasiumEnv`), ``"pettingzoo"`` (`PettingZooEnv`, PettingZoo parallel envs) and
``"rendezvous"`` (`RendezvousEnv`) and ``"gymnax"`` / ``"brax"`` (`GymnaxEnv`, `BraxEnv`: JAX envs on their
device; jax imported only when one is built), ``"pettingzoo_aec"`` / ``"openspiel"`` (`TurnBasedEnv`,
`OpenSpielEnv`: turn-based games against an opponent or a league).
"""

from rlightning.env.base_env import BaseEnv
from rlightning.env.env_group import EnvGroup
from rlightning.env.errors import EnvWorkerError, caller_error
from rlightning.env.gym_env import GymnasiumEnv, resolve_env_spec
from rlightning.env.gymnax_env import BraxEnv, GymnaxEnv
from rlightning.env.multi_agent_env import RendezvousEnv
from rlightning.env.pettingzoo_env import PettingZooEnv
from rlightning.env.rollout_worker import RolloutResult, RolloutWorker
from rlightning.env.turn_based_env import OpenSpielEnv, TurnBasedEnv
from rlightning.env.utils.utils import default_env_preprocess_fn

__all__ = [
    "BaseEnv",
    "EnvGroup",
    "EnvWorkerError",
    "BraxEnv",
    "GymnasiumEnv",
    "GymnaxEnv",
    "OpenSpielEnv",
    "PettingZooEnv",
    "RendezvousEnv",
    "RolloutResult",
    "RolloutWorker",
    "TurnBasedEnv",
    "caller_error",
    "default_env_preprocess_fn",
    "resolve_env_spec",
]
