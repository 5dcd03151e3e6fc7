"""Inference inside env workers: each worker acts with its own copy of the policy.

With ``cluster.inference="env_workers"`` an env worker holds an eval-role copy
of the run's policy and steps a whole rollout on its own: one call per worker
per rollout instead of one per step, the way a CPU-sized policy is cheapest to
run next to its envs::

    group.attach_policy(PPOPolicy, cfg.policy, metas[0], seed=0)   # builds the copy in every worker
    group.load_policy_weights(weights, version=1)                   # after every train -> eval sync
    for env_id, chunk in group.collect_rollouts(env_rets, num_steps=128):
        buffer.add_batched_transition(chunk.env_rets, chunk.policy_resps)

An env error in the middle of a rollout (the env's ``step`` raises) ends the
worker's chunk early: it comes back with the steps taken before the error and
the exception in ``error``; the group recreates the worker (see
`EnvGroup._restart`) and the chunk's ``last`` is the fresh reset EnvRet. A
failing policy copy is the caller's error and is raised as it is.

`WorkerInference` is the worker side (mixed into `BaseEnv`, so every env class,
local or Ray actor, has it); `GroupInference` is the group side (mixed into
`EnvGroup`). Torch is imported by a worker only when a policy is attached, so
env workers of the default layout stay without it.
"""

from __future__ import annotations

import pickle
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple

from rlightning.env.errors import caller_error, classify_env_failure, is_caller_error
from rlightning.types import BatchedData, EnvMeta, EnvRet, PolicyResponse, is_object_ref
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import resolve, resolve_one

logger = get_logger(__name__)

__all__ = ["RolloutChunk", "WorkerInference", "GroupInference"]


@dataclass
class RolloutChunk:
    """The steps one env worker took with its own policy copy.

    Attributes:
        env_rets: The EnvRet each step acted on, in order (the first is the one passed in).
        policy_resps: The PolicyResponse that answered each of them.
        last: The EnvRet after the last step (the next rollout starts from it).
        inference_s: Seconds the worker spent computing actions.
        env_step_s: Seconds the worker spent stepping its envs.
        error: The exception the env raised when a step failed (the chunk then holds the steps before it,
            and the group sets ``last`` to the recreated worker's reset EnvRet); None otherwise.
    """

    env_rets: List[EnvRet] = field(default_factory=list)
    policy_resps: List[PolicyResponse] = field(default_factory=list)
    last: Optional[EnvRet] = None
    inference_s: float = 0.0
    env_step_s: float = 0.0
    error: Optional[BaseException] = None

    @property
    def num_steps(self) -> int:
        """Vector steps in the chunk."""
        return len(self.env_rets)

    def produced_env_rets(self) -> List[EnvRet]:
        """The EnvRets the worker's ``step`` returned (every one but the first, then ``last``)."""
        if self.last is None:
            return []
        return self.env_rets[1:] + [self.last]


class WorkerInference:
    """Env-worker side: a policy copy and the rollout loop around ``self.step``."""

    _policy: Any = None

    def attach_policy(
        self, policy_cls: type, policy_config: Any, env_meta: EnvMeta, seed: Optional[int] = None
    ) -> Dict[str, Any]:
        """Build an eval-role copy of ``policy_cls`` for ``env_meta`` in this worker.

        Args:
            policy_cls: A `BasePolicy` subclass (the user's class, not a Ray actor class).
            policy_config: Its `PolicyConfig`.
            env_meta: The spaces the networks are built for.
            seed: Seeds the copy's RNGs (offset by this worker's index); None leaves them alone.

        Returns:
            ``num_parameters`` and ``weight_version`` of the copy.

        Raises:
            TypeError: ``policy_cls`` is not a `BasePolicy` subclass.
        """
        from rlightning.policy.base_policy import BasePolicy, PolicyRole

        if not (isinstance(policy_cls, type) and issubclass(policy_cls, BasePolicy)):
            raise caller_error(TypeError(f"attach_policy needs a BasePolicy subclass, got {policy_cls!r}"))
        index = int(getattr(self, "worker_index", 0))
        policy = policy_cls(policy_config, role_type=PolicyRole.EVAL, worker_index=index)
        result = policy.setup(env_meta, seed)
        self._policy = policy
        return {"num_parameters": result["num_parameters"], "weight_version": result["weight_version"]}

    def _require_policy(self, what: str) -> Any:
        if self._policy is None:
            raise caller_error(
                RuntimeError(
                    f"env {getattr(self, 'env_id', '?')}: {what} needs a policy in the env worker; "
                    "call attach_policy first (cluster.inference='env_workers' does it)"
                )
            )
        return self._policy

    def load_policy_weights(self, weights: Dict[str, Any], weight_version: int) -> int:
        """Load train weights (name -> array) into the policy copy; returns its weight version."""
        return self._require_policy("load_policy_weights").load_state_dict(weights, weight_version)

    def policy_weights_checksum(self) -> str:
        """SHA-1 of the policy copy's weights (compare with the train worker's ``weights_checksum``)."""
        return self._require_policy("policy_weights_checksum").weights_checksum()

    def collect_rollout(self, env_ret: EnvRet, num_steps: int) -> RolloutChunk:
        """Act on ``env_ret`` and step the envs ``num_steps`` times with the policy copy.

        An exception of the env's own ``step`` ends the chunk early (see `RolloutChunk.error`); the
        policy copy's exceptions and the caller errors of ``step`` are raised.

        Raises:
            RuntimeError: no policy attached.
            ValueError: ``num_steps`` below 1, or an EnvRet of another env.
        """
        policy = self._require_policy("collect_rollout")
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise caller_error(ValueError(f"collect_rollout: num_steps must be an int >= 1, got {num_steps!r}"))
        env_id = getattr(self, "env_id", None)
        if not isinstance(env_ret, EnvRet) or env_ret.env_id != (env_id or env_ret.env_id):
            got = repr(env_ret.env_id) if isinstance(env_ret, EnvRet) else type(env_ret).__name__
            raise caller_error(ValueError(f"env {env_id}: collect_rollout needs an EnvRet of this env, got {got}"))
        chunk = RolloutChunk()
        clock = time.perf_counter
        for _ in range(num_steps):
            t0 = clock()
            try:
                resp = policy.rollout_batch([env_ret])[0]
            except Exception as err:  # noqa: BLE001 - the policy's failure is the caller's: never a restart
                caller_error(err)
                raise
            t1 = clock()
            try:
                next_ret = self.step(resp)
            except Exception as err:  # noqa: BLE001 - the env's own failure ends the chunk; the group recreates it
                if is_caller_error(err):
                    raise
                chunk.error = _portable_error(err, env_id)
                chunk.env_step_s += clock() - t1
                chunk.inference_s += t1 - t0
                return chunk
            chunk.env_rets.append(env_ret)
            chunk.policy_resps.append(resp)
            env_ret = next_ret
            chunk.env_step_s += clock() - t1
            chunk.inference_s += t1 - t0
        chunk.last = env_ret
        return chunk


def _portable_error(err: BaseException, env_id: Optional[str]) -> BaseException:
    """``err`` with the worker's traceback as a note, made picklable (it travels back in a `RolloutChunk`)."""
    trace = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    note = f"raised in env worker {env_id}:\n{trace}"
    try:
        err.add_note(note)
        pickle.dumps(err)
        return err
    except Exception:  # noqa: BLE001 - an exception that does not pickle travels as its type and text
        return RuntimeError(f"{type(err).__module__}.{type(err).__name__}: {err}\n{note}")


class GroupInference:
    """`EnvGroup` side: attach the policy copies, keep them in sync, collect whole rollouts."""

    def _init_inference(self) -> None:
        self._policy_setup: Optional[Tuple[type, Any, EnvMeta, Optional[int]]] = None
        self._policy_weights: Optional[Tuple[Any, int]] = None

    @property
    def has_policy(self) -> bool:
        """True once `attach_policy` built a policy copy in every worker."""
        return self._policy_setup is not None

    def attach_policy(
        self, policy_cls: type, policy_config: Any, env_meta: EnvMeta, seed: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """Build an eval-role copy of the policy in every worker (see `WorkerInference.attach_policy`)."""
        self._require_init()
        results = resolve(
            [s.handle.submit("attach_policy", policy_cls, policy_config, env_meta, seed) for s in self._slots]
        )
        self._policy_setup = (policy_cls, policy_config, env_meta, seed)
        self._policy_weights = None
        logger.info("policy %s attached to %d env workers", policy_cls.__name__, self.num_workers)
        return results

    def load_policy_weights(self, weights: Dict[str, Any], weight_version: int) -> None:
        """Load ``weights`` into every worker's policy copy (one object-store copy for Ray workers)."""
        if self._policy_setup is None:
            raise RuntimeError("load_policy_weights needs attach_policy first")
        self._require_init()
        payload = weights
        if self._remote != is_object_ref(weights):  # Ray workers read one object-store copy; local ones a dict
            import ray

            payload = ray.put(weights) if self._remote else ray.get(weights)
        version = int(weight_version)
        self._policy_weights = (payload, version)
        resolve([s.handle.submit("load_policy_weights", payload, version) for s in self._slots])

    def _reattach_policy(self, slot: Any) -> None:
        """A relaunched worker gets its policy copy and the latest weights back."""
        if self._policy_setup is None:
            return
        slot.handle.call("attach_policy", *self._policy_setup)
        if self._policy_weights is not None:
            slot.handle.call("load_policy_weights", *self._policy_weights)

    def collect_rollouts(self, env_rets: BatchedData, num_steps: int) -> Iterator[Tuple[str, RolloutChunk]]:
        """Run ``num_steps`` steps in every worker named in ``env_rets``; yield (env id, chunk) in worker order.

        Every worker call is issued first; the caller stores one worker's chunk while the others still run.
        Chunks come in the order of the workers, not of their arrival, so a seeded run stores (and
        trains on) the same data every time.
        A worker that dies is relaunched and reset (see `EnvGroup.step`): it yields an empty chunk
        whose ``last`` is its fresh reset EnvRet, and its env id is queued for `pop_restarted_env_ids`.
        A worker whose env raises is recreated the same way: its chunk holds the steps before the error
        (``error`` set) and ``last`` is the fresh reset EnvRet.

        Raises:
            RuntimeError: no policy attached.
            TypeError, KeyError, ValueError: as `EnvGroup.step` for the batch.
        """
        if self._policy_setup is None:
            raise RuntimeError("collect_rollouts needs a policy in the env workers: call attach_policy first")
        _, slots, rets = self._route(env_rets)
        futures = [slot.handle.submit("collect_rollout", ret, num_steps) for slot, ret in zip(slots, rets)]
        for slot, fut in zip(slots, futures):
            try:
                chunk = resolve_one(fut)
            except Exception as err:  # noqa: BLE001 - re-raised unless the worker died or its env raised
                kind = classify_env_failure(err, self._remote)
                if kind is None:
                    raise
                chunk = RolloutChunk(last=self._restart(slot, err, kind=kind, method="collect_rollout"))
            if chunk.error is not None:
                chunk.last = self._restart(slot, chunk.error, kind="raised", method="step")
            self._stats.add_env_rets(chunk.produced_env_rets())
            self._stats.add_steps(slot.num_envs * chunk.num_steps)
            yield slot.env_id, chunk
