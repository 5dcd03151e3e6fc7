"""`EnvGroup`: the env workers of a run, local objects or Ray actors, behind one interface.

    group = EnvGroup([EnvConfig(num_envs=8)] * 2)      # or build_env_group(cfg)
    metas = group.init()                               # builds the workers; list[EnvMeta]
    env_rets = group.reset(seed=0)                     # BatchedData of EnvRet, one per worker
    env_rets = group.step(policy_resps)                # BatchedData of PolicyResponse -> of EnvRet
    group.step_async(policy_resps); ready = group.collect_async()
    group.attach_policy(...); group.collect_rollouts(128)   # acting in the workers: [N, T] records
    group.stats(); group.close()

Each worker is a `RolloutWorker` (a `BaseEnv` plus, once attached, a policy
copy); the group's part of acting in the workers is a `PolicyCopies` object.

Workers are built by `init()`: in this process, or as Ray actors (one per
worker, ``num_cpus`` / ``num_gpus`` from the `EnvConfig`) when the group's
``remote`` / ``placement`` says so (neither given: ``InternalFlag.REMOTE_ENV``
when `init` runs). Every call goes through the call layer
(`WorkerHandle`, `resolve`, `wait_any`), so one code path serves both, and
`step` issues every worker call before resolving them all with one `resolve`.

Fault tolerance: a worker actor that dies (``RayActorError``), or a worker
whose env raises in ``step`` / ``reset`` (a crashing simulator: the exception
itself from a local worker, a ``RayTaskError`` wrapping it from an actor), is
recreated (at most ``EnvConfig.max_restarts`` times in a row: a clean step or
rollout forgives earlier failures; ``max_total_restarts`` over its life) and reset;
its fresh reset `EnvRet` stands in for the lost step, its env id is queued for
`pop_restarted_env_ids` (the engine truncates its episodes in flight in the
buffer, so they are never stored as complete), and the restart (and the env
error) is counted in `stats`. Past the limit `EnvWorkerError` names the env
id, the counts and the original exception. The caller's own bugs (a wrong
`PolicyResponse`, an action outside the space) are raised at once, never
retried (see `rlightning.env.errors`). The restart path is `WorkerRecovery`
(`rlightning.env.recovery`); a gymnasium worker rebuilds its env in place
(``GymnasiumEnv.recreate_env``), keeping its actor and policy copy.
"""

from __future__ import annotations

import sys
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from rlightning.env.acting import PolicyCopies
from rlightning.env.errors import EnvWorkerError, classify_env_failure
from rlightning.env.local_rollout import collect_local
from rlightning.env.recovery import WorkerRecovery, forgive
from rlightning.env.rollout_loop import can_step_together
from rlightning.env.rollout_worker import RolloutResult
from rlightning.env.step_payload import step_payloads
from rlightning.env.utils.stats import GroupStats
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.env.worker_slot import WorkerSlot, build_slots
from rlightning.types import BatchedData, EnvMeta, is_object_ref
from rlightning.utils.config import EnvConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.placement import Placement, check_placement_args, resolve_placement
from rlightning.utils.ray.handle import WorkerHandle, resolve, resolve_one, wait_any
from rlightning.utils.registry import closest

logger = get_logger(__name__)


class EnvGroup:
    """The env workers of a run.

    Args:
        env_cfg_list: One `EnvConfig` per worker (see `define_env_instance_cfgs`); workers get global
            indices ``0..N-1`` in this order and ids ``f"{name}-{index}"``.
        preprocess_fn: `PolicyResponse` -> action, one for all workers or one per worker
            (None: `default_env_preprocess_fn`).
        remote: Ray actors (True) or in this process (False); None: as ``placement`` says.
        placement: The run's `Placement` (its ``remote_env``; its actors' ``RLIGHTNING_*`` variables);
            None with ``remote`` None: as ``InternalFlag.REMOTE_ENV`` says when `init` runs.

    Raises:
        ValueError: an empty config list, ``num_envs < 1``, or a preprocess list of the wrong length.
        TypeError: a config that is not an `EnvConfig`, or a preprocess function that is not callable.
        KeyError: an env backend that is not registered in ``ENVS`` (closest names listed).
    """

    def __init__(
        self,
        env_cfg_list: Union[List[EnvConfig], EnvConfig],
        preprocess_fn: Optional[Union[Callable, List[Callable]]] = default_env_preprocess_fn,
        *,
        remote: Optional[bool] = None,
        placement: Optional[Placement] = None,
    ) -> None:
        check_placement_args(remote, placement)  # InternalFlag is read when init() runs
        self._placement_args = (remote, placement)
        self._slots: List[WorkerSlot] = build_slots(env_cfg_list, preprocess_fn)
        self._by_id: Dict[str, WorkerSlot] = {slot.env_id: slot for slot in self._slots}
        self._metas: List[EnvMeta] = []
        self._initialized = False
        self._remote = False
        self._inflight: Dict[Any, WorkerSlot] = {}
        self._sent: Dict[Any, float] = {}  # future in flight -> when it was submitted (its step timeout)
        self._last_seed: Optional[int] = None
        self._stats = GroupStats(self.env_ids)
        self._total_envs = sum(slot.num_envs for slot in self._slots)
        self._copies = PolicyCopies()
        self._recovery = WorkerRecovery(self._stats, self._seed_for, self._reattach_policy)
        limits = [slot.config.step_timeout_s for slot in self._slots if slot.config.step_timeout_s is not None]
        self._recovery.step_timeout_s = min(limits) if limits else None

    # ------------------------------------------------------------------ properties

    @property
    def env_ids(self) -> List[str]:
        """Env ids of the workers, in worker-index order."""
        return [slot.env_id for slot in self._slots]

    @property
    def env_metas(self) -> List[EnvMeta]:
        """The workers' `EnvMeta` (empty before `init`)."""
        return list(self._metas)

    @property
    def num_workers(self) -> int:
        """Number of env workers."""
        return len(self._slots)

    @property
    def num_envs(self) -> int:
        """Sub-environments over all workers."""
        return sum(slot.num_envs for slot in self._slots)

    @property
    def is_remote(self) -> bool:
        """True when the workers are Ray actors."""
        return self._remote

    @property
    def is_initialized(self) -> bool:
        """True between `init` and `close`."""
        return self._initialized

    @property
    def workers(self) -> Dict[str, Any]:
        """env id -> the worker object or Ray actor handle (empty before `init`)."""
        return {slot.env_id: slot.handle.worker for slot in self._slots if slot.handle is not None}

    def __len__(self) -> int:
        return len(self._slots)

    def __repr__(self) -> str:
        where = "remote" if self._remote else "local"
        return f"EnvGroup({self.num_workers} workers, {self.num_envs} envs, {where}, initialized={self._initialized})"

    # ------------------------------------------------------------------ lifecycle

    def init(self) -> List[EnvMeta]:
        """Build the workers and return their `EnvMeta`.

        Workers are Ray actors as the group's ``remote`` / ``placement`` say (neither given:
        ``InternalFlag.REMOTE_ENV`` now).

        Calling it again on an initialised group returns the same metadata.

        Raises:
            KeyError: an unknown env id (closest gymnasium and ``ENVS`` names listed), before any worker is built.
            RuntimeError: remote workers asked for but Ray is not initialised.
        """
        if self._initialized:
            return list(self._metas)
        placement = resolve_placement("env", *self._placement_args)
        remote = placement.remote_env
        for slot in self._slots:
            slot.prepare()
        try:
            for slot in self._slots:
                slot.launch(remote, env_vars=placement.env_vars())
            metas = resolve([slot.handle.submit("get_metadata") for slot in self._slots])
        except BaseException:
            self._shutdown_workers()
            raise
        for slot, meta in zip(self._slots, metas):
            if meta.env_id != slot.env_id:
                self._shutdown_workers()
                raise ValueError(
                    f"env worker {slot.index} reports env_id {meta.env_id!r}, expected {slot.env_id!r}; "
                    "BaseEnv sets env_id from config.name and worker_index, keep it"
                )
            slot.meta = meta
        self._metas = list(metas)
        self._remote = remote
        self._recovery.remote = remote
        self._recovery.gone = False
        self._initialized = True
        logger.info("env group ready: %d workers, %d envs, %s", self.num_workers, self.num_envs, self._where())
        return list(self._metas)

    def close(self) -> None:
        """Close the workers and stop the Ray actors this group started. Safe to call twice."""
        if not self._initialized and all(slot.handle is None for slot in self._slots):
            return
        ray = sys.modules.get("ray")
        if self._remote and ray is not None and not ray.is_initialized():
            # The runtime was shut down first and the actors with it: a call now would start a new one.
            logger.info("env group: the Ray runtime was shut down before close; its actors went with it")
            for slot in self._slots:
                slot.handle, slot.inflight = None, False
            self._inflight.clear()
        self._drain_inflight()
        self._shutdown_workers()
        self._sent.clear()
        self._initialized = False
        self._copies = PolicyCopies()

    def __enter__(self) -> EnvGroup:
        self.init()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _where(self) -> str:
        return "as Ray actors" if self._remote else "in this process"

    def _shutdown_workers(self) -> None:
        futures = []
        for slot in self._slots:
            if slot.handle is not None:
                futures.append(slot.handle.submit("close"))
        for fut in futures:
            try:
                resolve_one(fut, timeout=30)
            except Exception as err:  # noqa: BLE001 - a dead or stuck worker must not block closing the rest
                logger.debug("closing an env worker failed: %r", err)
        for slot in self._slots:
            slot.stop()
        self._inflight.clear()

    def _require_init(self, slots: Optional[Sequence[WorkerSlot]] = None) -> None:
        if not self._initialized:
            raise RuntimeError("the EnvGroup is not initialised: call init() first (or use it as a context manager)")
        for slot in self._slots if slots is None else slots:
            if slot.handle is None:
                how = "failed (raised or died)" if slot.env_errors else "died"
                raise EnvWorkerError(
                    f"env worker {slot.env_id} is gone: it {how} more than max_restarts={slot.config.max_restarts} "
                    "times; close() this group and build a new one",
                    slot.env_id,
                    slot.restarts,
                    slot.env_errors,
                )

    # ------------------------------------------------------------------ reset and step

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> BatchedData:
        """Reset every worker; steps still in flight are awaited and dropped.

        Args:
            seed: Worker ``i`` is seeded with ``seed`` plus the sub-env count of the workers before it, so
                every sub-env gets its own seed and a run is reproducible (None: unseeded).
            options: Passed to each worker's ``reset``.

        Returns:
            BatchedData of `EnvRet`, one per worker, in worker order.
        """
        self._require_init()
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            raise ValueError(f"seed must be None or an int >= 0, got {seed!r}")
        self._drain_inflight(recover=True)
        self._last_seed = seed
        futures = [slot.handle.submit("reset", seed=self._seed_for(slot), options=options) for slot in self._slots]
        values = self._resolve_recovering(self._slots, futures, method="reset")
        return BatchedData([slot.env_id for slot in self._slots], values)

    def _seed_for(self, slot: WorkerSlot) -> Optional[int]:
        if self._last_seed is None:
            return None
        return self._last_seed + slot.seed_offset + slot.restarts * self.num_envs

    def step(self, policy_resps: BatchedData, return_refs: bool = False) -> BatchedData:
        """Step the workers named in ``policy_resps`` and return their EnvRets, in the same order.

        Args:
            policy_resps: BatchedData of env id -> `PolicyResponse` (values or ObjectRefs). Any subset of
                the workers may be stepped; an id may appear once.
            return_refs: With Ray workers, leave the EnvRets in the object store and return ObjectRefs (for
                policy or buffer actors to read directly); only a small episode report comes to the driver.
                Local workers return values either way.

        Returns:
            BatchedData of env id -> `EnvRet` (or ObjectRef). A worker that died or whose env raised,
            and was recreated, contributes its fresh reset EnvRet (see `pop_restarted_env_ids`).

        Raises:
            TypeError: ``policy_resps`` is not a BatchedData.
            KeyError: an unknown env id (the valid ones listed).
            ValueError: an id given twice, an id with a step in flight, or an action outside the action space.
            EnvWorkerError: a worker failed past ``max_restarts`` (env id, counts and cause named).
        """
        ids, slots, resps = self._route(policy_resps)
        if not slots:
            return BatchedData([], [])
        if self._remote:
            resps = step_payloads(slots, resps)
        if return_refs and self._remote:
            values = self._step_refs(slots, resps)
        else:
            futures = [s.handle.submit("step", r) for s, r in zip(slots, resps)]
            values = self._resolve_recovering(slots, futures, method="step")
            self._stats.add_env_rets(values)
        self._stats.add_steps(self._total_envs if len(slots) == len(self._slots) else sum(s.num_envs for s in slots))
        return BatchedData(ids, values)

    def _step_refs(self, slots: List[WorkerSlot], resps: List[Any]) -> List[Any]:
        """Step remote workers with two returns each: the EnvRet stays remote, the episode report comes here."""
        env_refs: List[Any] = []
        report_refs: List[Any] = []
        for slot, resp in zip(slots, resps):
            env_ref, report_ref = slot.handle.worker.step_report.options(num_returns=2).remote(resp)
            env_refs.append(env_ref)
            report_refs.append(report_ref)
        restarted: Dict[int, Any] = {}
        reports = self._resolve_recovering(slots, report_refs, replaced=restarted, method="step")
        values = []
        for i, (ref, report) in enumerate(zip(env_refs, reports)):
            if i in restarted:
                values.append(restarted[i])
            else:
                self._stats.add_episodes(*report)
                values.append(ref)
        return values

    def step_async(self, policy_resps: BatchedData) -> None:
        """Submit steps without waiting; `collect_async` returns the EnvRets as they are ready.

        Raises:
            Same as `step`.
        """
        _, slots, resps = self._route(policy_resps)
        if self._remote:
            resps = step_payloads(slots, resps)
        now = time.perf_counter()
        for slot, resp in zip(slots, resps):
            fut = slot.handle.submit("step", resp)
            self._inflight[fut] = slot
            self._sent[fut] = now
            slot.inflight = True

    def collect_async(
        self, timeout: Optional[float] = None, min_ready: int = 1, gather_ready: bool = True
    ) -> BatchedData:
        """Return the EnvRets of submitted steps that are ready, waiting for at least ``min_ready``.

        Args:
            timeout: Seconds to wait for ``min_ready`` results (None: as long as it takes); whatever is
                ready then is returned, possibly nothing.
            min_ready: Results to wait for (capped at the number in flight).
            gather_ready: Also return the other steps ready by then. With Ray workers that is one more
                ``ray.wait`` (about 90 us here, as much as a step's call); False returns the first
                ``min_ready`` only (the rest are returned by the next call).

        Returns:
            BatchedData of env id -> `EnvRet`, in the order they became ready; empty when nothing is in flight.
        """
        if isinstance(min_ready, bool) or not isinstance(min_ready, int) or min_ready < 1:
            raise ValueError(f"min_ready must be an int >= 1, got {min_ready!r}")
        if timeout is not None and (not isinstance(timeout, (int, float)) or timeout < 0):
            raise ValueError(f"timeout must be None or a number of seconds >= 0, got {timeout!r}")
        if not self._inflight:
            return BatchedData([], [])
        futures = list(self._inflight)
        ready, late = self._recovery.wait_ready(futures, self._sent, min(min_ready, len(futures)), timeout)
        pending = [f for f in futures if f not in set(ready) | set(late)]
        if pending and ready and gather_ready:
            more, _ = wait_any(pending, num_returns=len(pending), timeout=0)
            ready = list(ready) + list(more)
        now = time.perf_counter()
        for fut in ready:
            self._recovery.record("step", now - self._sent.pop(fut, now))
        slots = [self._inflight.pop(fut) for fut in ready]
        for slot in slots:
            slot.inflight = False
        values = self._resolve_recovering(slots, ready, method="step")
        for fut in late:  # hung past the step timeout: killed and recreated, its reset EnvRet stands in
            slot = self._inflight.pop(fut)
            self._sent.pop(fut, None)
            slot.inflight = False
            values.append(self._recovery.time_out(slot, "step", self._recovery.timeout_for("step")))
            slots.append(slot)
        self._stats.add_env_rets(values)
        self._stats.add_steps(sum(slot.num_envs for slot in slots))
        return BatchedData([slot.env_id for slot in slots], values)

    @contextmanager
    def auto_reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> Iterator[BatchedData]:
        """Context for a stretch of stepping: init if needed, reset on entry, settle on exit.

        Yields the reset EnvRets. Inside, sub-environments roll over into new episodes by themselves (NEXT_STEP
        autoreset); on exit, steps still in flight are awaited and dropped, so the group can be reset, stepped
        or closed cleanly afterwards::

            with group.auto_reset(seed=0) as env_rets:
                for _ in range(100):
                    env_rets = group.step(policy.rollout(env_rets))
        """
        if not self._initialized:
            self.init()
        env_rets = self.reset(seed=seed, options=options)
        try:
            yield env_rets
        except BaseException:
            self._drain_inflight()  # the body's exception is the one raised
            raise
        self._drain_inflight(recover=True)

    # ------------------------------------------------------------------ acting in the workers

    @property
    def has_policy(self) -> bool:
        """True once `attach_policy` built a policy copy in every worker."""
        return self._copies.attached

    def attach_policy(
        self, policy: Any, policy_config: Any = None, env_meta: Optional[EnvMeta] = None, seed: Optional[int] = None
    ) -> List[Dict[str, Any]]:
        """Build an eval-role copy in every worker with the policy side's factory, or a policy class's (see
        `RolloutWorker.attach_policy`)."""
        self._require_init()
        return self._copies.attach([s.handle for s in self._slots], policy, policy_config, env_meta, seed)

    def load_policy_weights(self, weights: Dict[str, Any], weight_version: int) -> None:
        """Load ``weights`` into every worker's policy copy (one object-store copy for Ray workers)."""
        if not self._copies.attached:
            raise RuntimeError("load_policy_weights needs attach_policy first")
        self._require_init()
        self._copies.load([s.handle for s in self._slots], weights, weight_version, self._remote)

    def policy_handles(self) -> List[WorkerHandle]:
        """The workers' handles, for a weight sync that reaches the policy copies (current after restarts)."""
        self._require_init()
        return [slot.handle for slot in self._slots]

    def set_policy_catch_up(self, catch_up: Optional[Callable[[WorkerHandle], None]]) -> None:
        """How a relaunched worker's fresh policy copy gets the current weights (None: the last loaded)."""
        self._copies.catch_up = catch_up

    def collect_rollouts(self, num_steps: int) -> Iterator[Tuple[str, RolloutResult]]:
        """Every worker collects ``num_steps`` steps with its policy copy; yield (env id, result) in worker order.

        Every worker call is issued first; the caller stores one worker's record while the others still run.
        Results come in the order of the workers, not of their arrival, so a seeded run stores (and trains on)
        the same data every time. A worker that dies is relaunched, re-armed and reset (see `step`): it yields
        a result without a record, and its env id is queued for `pop_restarted_env_ids`. A worker whose env
        raises is recreated the same way; its result holds the steps before the error (``error`` set).

        Raises:
            RuntimeError: no policy attached, or the group is not initialised.
            ValueError: ``num_steps`` below 1.
        """
        if not self._copies.attached:
            raise RuntimeError("collect_rollouts needs a policy in the env workers: call attach_policy first")
        if isinstance(num_steps, bool) or not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"collect_rollouts: num_steps must be an int >= 1, got {num_steps!r}")
        self._require_init()
        if self._inflight:
            raise ValueError("steps are in flight (step_async); collect_async() them before collecting rollouts")
        if not self._remote:
            workers = [slot.handle.worker for slot in self._slots]
            if can_step_together(workers):  # one forward pass per step for all local workers
                with ExitStack() as held:
                    for slot in self._slots:
                        held.enter_context(slot.handle.lock)
                    results = collect_local(workers, num_steps)
                for slot, result in zip(self._slots, results):
                    if result.error is None or result.num_steps:  # it stepped cleanly since its last restart
                        forgive(slot)
                    if result.error is not None:
                        self._restart(slot, result.error, kind="raised", method="step")
                    self._stats.add_episodes(result.episode_returns, result.episode_lengths)
                    self._stats.add_agent_episodes(result.agent_episode_returns, result.env_id)
                    self._stats.add_steps(slot.num_envs * result.num_steps)
                    yield slot.env_id, result
                return
        futures = [slot.handle.submit("collect", num_steps) for slot in self._slots]
        start, timeout, late = time.perf_counter(), self._recovery.timeout_for("collect"), False
        for slot, fut in zip(self._slots, futures):
            if timeout is not None and wait_any([fut], 1, max(0.0, start + timeout - time.perf_counter()))[1]:
                late = True  # a hung rollout: the worker is killed and recreated, its partial episodes dropped
                self._recovery.time_out(slot, "collect", timeout)
                yield slot.env_id, RolloutResult(slot.env_id, num_envs=slot.num_envs)
                continue
            try:
                result = resolve_one(fut)
            except Exception as err:  # noqa: BLE001 - re-raised unless the worker died or its env raised
                kind = classify_env_failure(err, self._remote)
                if kind is None:
                    raise
                self._restart(slot, err, kind=kind, method="collect")
                result = RolloutResult(slot.env_id, num_envs=slot.num_envs)
            else:
                if result.error is None or result.num_steps:  # it stepped cleanly since its last restart
                    forgive(slot)
            if result.error is not None:  # the env raised mid-rollout: the steps before it are kept
                self._restart(slot, result.error, kind="raised", method="step")
            self._stats.add_episodes(result.episode_returns, result.episode_lengths)
            self._stats.add_agent_episodes(result.agent_episode_returns, result.env_id)
            self._stats.add_steps(slot.num_envs * result.num_steps)
            yield slot.env_id, result
        if not late:
            self._recovery.record("collect", time.perf_counter() - start)

    # ------------------------------------------------------------------ faults and stats

    def pop_restarted_env_ids(self) -> List[str]:
        """Env ids whose worker was recreated (died or raised) since the last call (the engine truncates their
        episodes in flight)."""
        return self._recovery.pop_restarted()

    def stats(self) -> Dict[str, Any]:
        """Plain snapshot: env steps, env steps/s, recent episode returns and lengths, restarts and env errors
        per worker (``restarts``, ``env_errors``) and in total (``total_restarts``, ``total_env_errors``)."""
        out = {
            "num_workers": self.num_workers,
            "num_envs": self.num_envs,
            "env_ids": self.env_ids,
            "remote": self._remote,
            "initialized": self._initialized,
            "in_flight": len(self._inflight),
        }
        out.update(self._stats.snapshot())
        return out

    def stats_state(self) -> Dict[str, Any]:
        """The counters a checkpoint keeps: env steps, episodes, recent returns and lengths, restarts, errors."""
        return self._stats.state()

    def restore_stats(self, state: Dict[str, Any]) -> None:
        """Take back the counters of `stats_state` (a resumed run); with ``acting_rng``, the policy copies'
        generator states too."""
        self._stats.restore(state)
        rngs = state.get("acting_rng")
        if self._copies.attached and isinstance(rngs, list) and len(rngs) == len(self._slots):
            resolve([s.handle.submit("set_acting_rng_state", r) for s, r in zip(self._slots, rngs) if r is not None])

    def stats_state_with_rng(self) -> Dict[str, Any]:
        """`stats_state` plus the policy copies' numpy generator states (``acting_rng``, one per worker)."""
        out = self.stats_state()
        if self._copies.attached and self._initialized:
            out["acting_rng"] = resolve([s.handle.submit("acting_rng_state") for s in self._slots])
        return out

    # ------------------------------------------------------------------ internals

    def _route(self, policy_resps: BatchedData) -> Tuple[Sequence[str], List[WorkerSlot], Sequence[Any]]:
        """(ids, slots, responses); local workers get their ObjectRef responses resolved in one call."""
        if not isinstance(policy_resps, BatchedData):
            raise TypeError(
                f"policy_resps must be a BatchedData of env id -> PolicyResponse, got {type(policy_resps).__name__}"
            )
        if not self._initialized:
            self._require_init()
        ids = policy_resps.ids()
        resps = policy_resps.values()
        if len(ids) > 1 and len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"policy_resps names env ids {dup} more than once; give one response per env worker")
        by_id = self._by_id
        try:
            slots = [by_id[env_id] for env_id in ids]
        except (KeyError, TypeError):
            bad = next(env_id for env_id in ids if not isinstance(env_id, str) or env_id not in by_id)
            near = closest(str(bad), self.env_ids)
            hint = f" Did you mean {near[0]!r}?" if near else ""
            raise KeyError(f"unknown env id {bad!r}.{hint} This group's env ids: {', '.join(self.env_ids)}") from None
        if self._inflight or self._recovery.gone:
            for slot in slots:
                self._require_init([slot])
                if slot.inflight:
                    raise ValueError(
                        f"env {slot.env_id} already has a step in flight; collect_async() it before stepping again"
                    )
        if not self._remote and "ray" in sys.modules:
            local_refs = [i for i, resp in enumerate(resps) if is_object_ref(resp)]
            if local_refs:
                resps = list(resps)
                for i, value in zip(local_refs, resolve([resps[i] for i in local_refs])):
                    resps[i] = value
        return ids, slots, resps

    def _resolve_recovering(
        self,
        slots: Sequence[WorkerSlot],
        futures: Sequence[Any],
        replaced: Optional[Dict[int, Any]] = None,
        method: str = "step",
    ) -> List[Any]:
        """`resolve` the futures, recreating a worker that died or whose env raised (`WorkerRecovery.resolve`)."""
        return self._recovery.resolve(slots, futures, replaced=replaced, method=method)

    def _restart(self, slot: WorkerSlot, cause: BaseException, kind: str = "died", method: str = "step") -> Any:
        """Recreate a worker that died or whose env raised and return its reset EnvRet (`WorkerRecovery.restart`)."""
        return self._recovery.restart(slot, cause, kind=kind, method=method)

    def _reattach_policy(self, slot: WorkerSlot) -> None:
        """A relaunched worker gets its policy copy and the current weights back (`PolicyCopies.rearm`)."""
        self._copies.rearm(slot.handle)

    def _drain_inflight(self, recover: bool = False) -> None:
        """Wait for steps in flight and drop their results (`WorkerRecovery.drain`)."""
        if self._inflight:
            self._recovery.drain(self._inflight, recover=recover)
        self._sent.clear()


__all__ = ["EnvGroup"]
