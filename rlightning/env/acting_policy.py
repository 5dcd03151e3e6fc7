"""What an env worker needs of the policy it acts with: `ActingPolicy`, built by a `PolicyCopyFactory`.

With ``cluster.inference="env_workers"`` each `RolloutWorker` acts with its own
copy of the run's policy (eval role). The env package never imports policy
code: the policy side builds the copy. It hands the worker a picklable factory
(``worker_index -> ActingPolicy``), which the worker calls once, in its own
process; a relaunched worker gets the same factory again (`PolicyCopies.rearm`)::

    factory = PPOPolicy.acting_copy_factory(cfg.policy, metas[0], seed=0)  # policy side
    worker.attach_policy(factory)                                           # env side: factory(worker_index)

A policy class itself is accepted where a factory is (``attach_policy(PPOPolicy,
cfg.policy, meta, seed)``): the worker asks the class for its factory
(``acting_copy_factory``), by name, without importing its package.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Protocol, Sequence, runtime_checkable

from rlightning.types import EnvMeta, PolicyResponse

__all__ = ["ActingPolicy", "PolicyCopyFactory", "as_copy_factory", "check_acting_policy"]


@runtime_checkable
class ActingPolicy(Protocol):
    """The calls an env worker (and the group's lock-step collection) makes on its policy copy.

    `rlightning.policy.BasePolicy` conforms; so may any object with these members.

    Optional: a copy whose ``values_after_rollout`` is True also takes ``compute_actions(obs, deterministic,
    with_value=False)`` (no ``value`` in its outputs) and has ``compute_values(obs) -> [rows]``; a worker acting
    straight through ``compute_actions`` then asks it for the values of all its rollout's observations at once
    when the rollout ends (`rlightning.policy.algorithms.ppo.PPOPolicy`: the critic in blocks, not per step).
    """

    weight_version: int
    """Version of the weights the copy holds (tags every rollout)."""
    deterministic: bool
    """Whether it acts deterministically (passed to ``compute_actions``)."""
    stateful_acting: bool
    """True when actions depend on earlier steps (a recurrent state): it acts through ``rollout_batch``."""
    acts_on_observations: bool
    """True when ``compute_actions`` on bare observations answers as ``rollout_batch`` would (the fast path)."""

    def compute_actions(self, obs: Any, deterministic: bool = False) -> Dict[str, Any]:
        """Actions and extras for a batch of observations; every value has the leading batch dim."""
        ...

    def rollout_batch(self, env_rets: Sequence[Any]) -> List[PolicyResponse]:
        """One `PolicyResponse` per `EnvRet`."""
        ...

    def num_parameters(self) -> int:
        """Scalars in the weights a sync brings."""
        ...

    def load_state_dict(self, state_dict: Dict[str, Any], weight_version: Optional[int] = None) -> int:
        """Load weights (name -> array) in place; returns the weight version."""
        ...

    def copy_weights_from(self, other: Any, weight_version: Optional[int] = None) -> int:
        """Copy another policy's weights in place (a train worker in this process); returns the weight version."""
        ...

    def set_weight_version(self, weight_version: int) -> int:
        """Record the version of the weights held."""
        ...

    def set_deterministic(self, deterministic: bool = True) -> None:
        """Act deterministically (or not) from now on."""
        ...

    def weights_checksum(self) -> str:
        """A digest of the weights (compared with the train worker's)."""
        ...


class PolicyCopyFactory(Protocol):
    """Builds the policy copy of the env worker with global index ``worker_index`` (picklable: it travels)."""

    def __call__(self, worker_index: int) -> ActingPolicy: ...


# What isinstance checks (its attributes and methods), listed in the error.
_MEMBERS = (*ActingPolicy.__annotations__, *(n for n, v in vars(ActingPolicy).items() if callable(v) and n[0] != "_"))


def as_copy_factory(
    policy: Any, policy_config: Any = None, env_meta: Optional[EnvMeta] = None, seed: Optional[int] = None
) -> PolicyCopyFactory:
    """The factory that ``attach_policy``'s arguments name.

    Args:
        policy: A `PolicyCopyFactory` (then nothing else is given), or a policy class with an
            ``acting_copy_factory(policy_config, env_meta, seed)`` classmethod (a `BasePolicy` subclass).
        policy_config: The class's config (with a class only).
        env_meta: The spaces the copy's networks are built for (with a class only).
        seed: Seeds the copy's RNGs, offset by the worker's index (with a class only).

    Raises:
        TypeError: ``policy`` is neither; a class without ``env_meta``.
        ValueError: a factory given with ``policy_config``, ``env_meta`` or ``seed`` (it holds its own).
    """
    if isinstance(policy, type):
        make = getattr(policy, "acting_copy_factory", None)
        if not callable(make):
            raise TypeError(
                f"attach_policy needs a BasePolicy subclass (a class with acting_copy_factory) or a policy-copy "
                f"factory (worker_index -> policy), got {policy!r}"
            )
        if env_meta is None:
            raise TypeError(f"attach_policy({policy.__name__}, ...) needs env_meta (the spaces the copy is built for)")
        return make(policy_config, env_meta, seed)
    if not callable(policy):
        raise TypeError(
            f"attach_policy needs a BasePolicy subclass or a policy-copy factory (worker_index -> policy), "
            f"got {type(policy).__name__}"
        )
    extra = [
        name
        for name, value in (("policy_config", policy_config), ("env_meta", env_meta), ("seed", seed))
        if value is not None
    ]
    if extra:
        raise ValueError(
            f"attach_policy got a policy-copy factory and {', '.join(extra)}; a factory holds its own "
            "(give a policy class to have them used)"
        )
    return policy


def check_acting_policy(policy: Any, factory: Any) -> ActingPolicy:
    """``policy`` if it has every `ActingPolicy` member, else a TypeError naming the missing ones."""
    if isinstance(policy, ActingPolicy):
        return policy
    missing = [name for name in _MEMBERS if not hasattr(policy, name)]
    raise TypeError(
        f"the policy-copy factory {factory!r} built a {type(policy).__name__}, which is not an ActingPolicy; "
        f"missing: {', '.join(sorted(missing))}"
    )
