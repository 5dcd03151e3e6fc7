"""`EvalCopyFactory`: the policy side builds the policy copy an env worker acts with.

With ``cluster.inference="env_workers"`` every env worker holds an eval-role
copy of the run's policy. The env package imports no policy code (it defines
what it calls on the copy, `rlightning.env.acting_policy.ActingPolicy`), so
the copy is built by this picklable factory, which the env group sends to each
worker and again to a relaunched one::

    factory = PPOPolicy.acting_copy_factory(cfg.policy, metas[0], seed=0)   # an EvalCopyFactory
    env_group.attach_policy(factory)        # each worker: factory(worker_index) -> its copy, set up

A policy class passed to ``attach_policy`` is turned into this factory by its
``acting_copy_factory`` classmethod.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rlightning.policy.base_policy import BasePolicy, PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig

__all__ = ["EvalCopyFactory"]


@dataclass(frozen=True)
class EvalCopyFactory:
    """Builds ``policy_cls``'s eval-role copy for the env worker with a given index.

    Args:
        policy_cls: A `BasePolicy` subclass (the user's class, not a Ray actor class).
        policy_config: Its `PolicyConfig`.
        env_meta: The spaces the networks are built for.
        seed: Seeds each copy's RNGs (offset by the worker's index, as eval workers are); None leaves them alone.

    Raises:
        TypeError: ``policy_cls`` is not a `BasePolicy` subclass, ``policy_config`` not a `PolicyConfig`, or
            ``env_meta`` not an `EnvMeta` (raised where the factory is made, before any worker builds a copy).
    """

    policy_cls: type
    policy_config: PolicyConfig
    env_meta: EnvMeta
    seed: Optional[int] = None

    def __post_init__(self) -> None:
        if not (isinstance(self.policy_cls, type) and issubclass(self.policy_cls, BasePolicy)):
            raise TypeError(f"attach_policy needs a BasePolicy subclass, got {self.policy_cls!r}")
        if not isinstance(self.policy_config, PolicyConfig):
            raise TypeError(
                f"{self.policy_cls.__name__}.acting_copy_factory: policy_config must be a PolicyConfig, "
                f"got {type(self.policy_config).__name__}"
            )
        if not isinstance(self.env_meta, EnvMeta):
            raise TypeError(
                f"{self.policy_cls.__name__}.acting_copy_factory: env_meta must be an EnvMeta (the env's "
                f"get_metadata()), got {type(self.env_meta).__name__}"
            )

    def __call__(self, worker_index: int) -> BasePolicy:
        """The copy of env worker ``worker_index``: built in the eval role and set up for ``env_meta``."""
        policy = self.policy_cls(self.policy_config, role_type=PolicyRole.EVAL, worker_index=worker_index)
        policy.setup(self.env_meta, self.seed)
        return policy

    def __repr__(self) -> str:
        return f"EvalCopyFactory({self.policy_cls.__name__}, seed={self.seed})"
