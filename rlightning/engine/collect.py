"""`Collector`: the rollout state of an engine and its two loops (per step, or whole rollouts in the workers).

``cluster.inference="eval_workers"``: every step the policy group answers the
env workers' EnvRets and the env workers step (`Collector.collect_steps`);
``"env_workers"``: every env worker steps the whole rollout with its own
policy copy and returns one ``[N, T]`` record; the collector stores each
worker's record (``buffer.add_rollout``) as soon as it comes, in worker order,
while the others still run (`Collector.collect_chunks`).

The collector owns what a rollout needs between calls: the current EnvRets of
the per-step layout (the env-worker layout keeps them in the workers) and the
stop flag. Engines talk to the env group, the policy group and the buffer
through the small protocols below.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple

from rlightning.engine.step_chunks import StepChunks
from rlightning.env.rollout_loop import run_rollout
from rlightning.env.utils.episodes import EpisodeIds
from rlightning.env.utils.record_writer import start_done_flags
from rlightning.types import BatchedData
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["ActingGroup", "Collector", "GroupActor", "RolloutBuffer", "RolloutEnvs"]


class RolloutEnvs(Protocol):
    """What the collector needs of an env group (`rlightning.env.EnvGroup`)."""

    is_remote: bool

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> BatchedData: ...

    def step(self, policy_resps: BatchedData) -> BatchedData: ...

    def step_async(self, policy_resps: BatchedData) -> None: ...

    def collect_async(self, timeout: Optional[float] = None, min_ready: int = 1) -> BatchedData: ...

    def collect_rollouts(self, num_steps: int) -> Iterator[Tuple[str, Any]]: ...

    def pop_restarted_env_ids(self) -> List[str]: ...


class ActingGroup(Protocol):
    """What the per-step layout needs of a policy group (`rlightning.policy.PolicyGroup`)."""

    def rollout_batch(self, batch: BatchedData) -> BatchedData: ...


class RolloutBuffer(Protocol):
    """What the collector needs of a buffer (`rlightning.buffer.DataBuffer`)."""

    def add_rollout(self, td: Any) -> None: ...

    def add_rollouts(self, tds: Sequence[Any]) -> None: ...

    def truncate_episodes(self, env_ids: Optional[Sequence[Any]] = None) -> None: ...


class Collector:
    """Rollout state and loops of one engine.

    Args:
        env_group: The env workers (`RolloutEnvs`).
        policy_group: Acts in the per-step layout (`ActingGroup`).
        buffer: Where transitions go (`RolloutBuffer`).
        timing: The engine's `Timing` (``inference``, ``env_step``, ``buffer_add`` are added to it).
        env_ids: The env workers' ids, in worker order.
        num_sub_envs: Sub-environments over all workers.
        in_env_workers: True for ``cluster.inference="env_workers"``.

    Attributes:
        pipelined: Per-step layout: keep one step in flight per env worker and act on each worker's EnvRet
            as it comes (in flight, see `collect_steps`) instead of acting on all, stepping all and waiting for all.
            None (the default): pipelined with two or more Ray env workers, lock-step otherwise.
    """

    def __init__(
        self,
        env_group: RolloutEnvs,
        policy_group: ActingGroup,
        buffer: RolloutBuffer,
        timing: Any,
        env_ids: Sequence[str],
        num_sub_envs: int,
        in_env_workers: bool,
    ) -> None:
        self.env_group = env_group
        self.policy_group = policy_group
        self.buffer = buffer
        self.timing = timing
        self.env_ids = list(env_ids)
        self.num_sub_envs = int(num_sub_envs)
        self.in_env_workers = bool(in_env_workers)
        self.env_rets: Optional[BatchedData] = None
        self.stop_event = threading.Event()
        self._started = False
        self._episode_ids: Dict[str, EpisodeIds] = {}
        self._next_id_base = 0
        self.pipelined: Optional[bool] = None

    # ------------------------------------------------------------------ state

    @property
    def started(self) -> bool:
        """True once the envs were reset for this collector (False again after `forget`)."""
        return self._started

    @property
    def stop_requested(self) -> bool:
        """True once `request_stop` was called (until `clear_stop`)."""
        return self.stop_event.is_set()

    def request_stop(self) -> None:
        """Ask the loops (and the engine's run) to stop after the current step."""
        self.stop_event.set()

    def clear_stop(self) -> None:
        """Forget an earlier stop request."""
        self.stop_event.clear()

    def reset(self, seed: Optional[int] = None) -> BatchedData:
        """Reset every env (episodes in progress in the buffer are truncated first); returns the EnvRets."""
        if self._started:
            self.buffer.truncate_episodes(self.env_ids)
        self.env_rets = self.env_group.reset(seed=seed)
        for ids in self._episode_ids.values():
            ids.reset()
        self._started = True
        return self.env_rets

    def forget(self) -> None:
        """Drop the rollout state (after a checkpoint load): the next rollout resets the envs."""
        self.env_rets = None
        self._started = False

    def truncate_restarted(self, restarted: Optional[Sequence[str]] = None) -> None:
        """End the episodes in flight of env workers that were restarted (replaced after a failure): their next
        step is not paired with the old one, their episode counters restart, the buffer truncates them.

        ``restarted``: those env ids (None: the ones the env group reports since it was last asked).
        """
        if restarted is None:
            restarted = self.env_group.pop_restarted_env_ids()
        for env_id in restarted:
            if env_id in self._episode_ids:
                self._episode_ids[env_id].reset()
        if restarted:
            logger.warning("env workers %s were restarted; their episodes in flight are truncated", restarted)
            self.buffer.truncate_episodes(restarted)

    # ------------------------------------------------------------------ per step

    def _ids_of(self, env_id: str, ret: Any) -> EpisodeIds:
        ids = self._episode_ids.get(env_id)
        if ids is None and ret is not None:
            n = start_done_flags(ret).shape[0]
            ids = self._episode_ids[env_id] = EpisodeIds(n, base=self._next_id_base)
            self._next_id_base += 1 << 40
            ids.reset()
        return ids

    def collect_steps(
        self, num_steps: int, actor: Optional[Any] = None, lock: Optional[Any] = None, bootstrap: bool = True
    ) -> int:
        """Step every env worker ``num_steps`` times, the policy group acting; returns env steps.

        The rollout loop (`rlightning.env.rollout_loop.run_rollout`) drives the env group's workers as its
        streams and the policy group as its actor. The steps are written into one preallocated ``[N, T]``
        record per env worker (`StepChunks`) and stored at the end, one per worker, as the env-worker layout
        stores them. With `pipelined` (by default: two or more Ray env workers) each worker's next step is
        submitted as soon as its EnvRet is in and the answered steps are written while the next ones run;
        the records are the same (for a stochastic policy the draws come in another order across workers).

        Args:
            num_steps: Steps per env worker.
            actor: Acts instead of the policy group (`GroupActor`; the async engine paces it).
            lock: Held while the records are stored (the async engine's learner samples meanwhile).
            bootstrap: False: the records' last ``next.value`` is not asked for (a learner that computes its
                own values of ``next.obs``).
        """
        streams = _GroupStreams(self.env_group, self.env_rets, in_flight=self._pipelines())
        store, restarted = self.buffer.add_rollouts, self.truncate_restarted
        if lock is not None:
            store, restarted = _locked(lock, store), _locked(lock, restarted)
        chunks = StepChunks(self.env_rets, num_steps, self._ids_of, store, restarted, bootstrap=bootstrap)
        try:
            times = run_rollout(
                streams,
                actor if actor is not None else GroupActor(self.policy_group, self.timing),
                chunks,
                num_steps,
                in_flight=streams.in_flight,
                stop=self.stop_event,
            )
        finally:
            self.env_rets = streams.batch()
        self.timing.add("inference", times.inference)
        self.timing.add("env_step", times.env_step)
        self.timing.add("buffer_add", times.write)
        return times.env_steps({i: streams.rows(i) for i in streams.ids()})

    def _pipelines(self) -> bool:
        if self.pipelined is None:
            return bool(self.env_group.is_remote) and len(self.env_ids) >= 2
        return bool(self.pipelined)

    # ------------------------------------------------------------------ whole rollouts

    def collect_chunks(self, num_steps: int) -> int:
        """Every env worker steps ``num_steps`` times with its own policy copy; returns env steps.

        The buffer gets each worker's ``[N, T]`` record in worker order, one ``add_rollout`` each. The
        rollout parts are the workers' own inference and env-step seconds (for Ray workers, which run side
        by side, their mean) and the driver's buffer add.
        """
        results = self.env_group.collect_rollouts(num_steps)
        steps = 0
        inference = env_step = add = 0.0
        try:
            for _, result in results:
                if result.record is not None and result.num_steps:
                    t0 = time.perf_counter()
                    self.buffer.add_rollout(result.record)
                    add += time.perf_counter() - t0
                inference += result.inference_s
                env_step += result.env_step_s
                steps += result.num_steps * result.num_envs
        finally:
            # Whatever failed in the driver, let every worker's call finish (the workers keep their state).
            try:
                for _ in results:
                    pass
            except Exception as err:  # noqa: BLE001 - the first error is the one raised
                logger.debug("a rollout was lost after an earlier error: %r", err)
        self.truncate_restarted()
        # Ray workers run side by side: their mean is the rollout's share; local ones run one after another.
        workers = max(1, len(self.env_ids)) if self.env_group.is_remote else 1
        self.timing.add("inference", inference / workers)
        self.timing.add("env_step", env_step / workers)
        self.timing.add("buffer_add", add)
        return steps

    def collect(self, num_steps: int, seed: Optional[int] = None) -> int:
        """One rollout of ``num_steps`` steps per env worker, in this collector's layout; returns env steps.

        The envs are reset first (with ``seed``) when they have not been yet.
        """
        if not self._started:
            self.reset(seed=seed)
        if self.in_env_workers:
            return self.collect_chunks(num_steps)
        return self.collect_steps(num_steps)


def _locked(lock: Any, fn: Any) -> Any:
    def call(*args: Any) -> Any:
        with lock:
            return fn(*args)

    return call


class GroupActor:
    """The policy group as the rollout loop's actor: one ``rollout_batch`` call answers the given EnvRets."""

    def __init__(self, policy_group: ActingGroup, timing: Any) -> None:
        self.policy_group = policy_group
        self.timing = timing

    def _answer(self, ids: Sequence[str], rets: Sequence[Any]) -> Dict[str, Any]:
        return dict(self.policy_group.rollout_batch(BatchedData(list(ids), list(rets))).items())

    def act(self, ids: Sequence[str], rets: Sequence[Any]) -> List[Any]:
        resps = self._answer(ids, rets)
        record_latencies(self.timing, resps)
        return [resps[i] for i in ids]

    def values(self, ids: Sequence[str], rets: Sequence[Any]) -> List[Any]:
        resps = self._answer(ids, rets)
        return [getattr(resps[i], "value", None) for i in ids]


class _GroupStreams:
    """The env group's workers as the rollout loop's streams.

    Lock step: `step` is one ``EnvGroup.step`` for all. In flight: `submit` sends the steps (``step_async``) and
    `wait` returns the first one answered (``collect_async``); asking Ray which others are ready too is one more
    ``ray.wait``, which cost the per-step layout 3-4 % at 2x64, and the step submitted last is rarely done by
    then. A worker that died or whose env raised comes back with its reset
    EnvRet and is reported restarted.
    """

    def __init__(self, env_group: RolloutEnvs, env_rets: BatchedData, in_flight: bool) -> None:
        self.env_group = env_group
        self.in_flight = bool(in_flight)
        self._order = list(env_rets.ids())
        self._current = dict(env_rets.items())
        self._rows = {i: int(start_done_flags(ret).shape[0]) for i, ret in self._current.items()}
        self._sent = 0

    def ids(self) -> List[str]:
        return self._order

    def rows(self, env_id: str) -> int:
        return self._rows[env_id]

    def current(self, env_id: str) -> Any:
        return self._current[env_id]

    def batch(self) -> BatchedData:
        """Every worker's current EnvRet, in worker order."""
        return BatchedData(self._order, [self._current[i] for i in self._order])

    def step(self, ids: Sequence[str], resps: Sequence[Any]) -> Tuple[List[Tuple[str, Any]], List[str]]:
        return self._answers(self.env_group.step(BatchedData(list(ids), list(resps))))

    def submit(self, ids: Sequence[str], resps: Sequence[Any]) -> None:
        self.env_group.step_async(BatchedData(list(ids), list(resps)))
        self._sent += len(ids)

    def wait(self, min_ready: int) -> Tuple[List[Tuple[str, Any]], List[str]]:
        ready = self.env_group.collect_async(min_ready=1, gather_ready=False)
        self._sent -= len(ready)
        return self._answers(ready)

    def _answers(self, ready: BatchedData) -> Tuple[List[Tuple[str, Any]], List[str]]:
        """The answered EnvRets (now where their workers stand) and the workers recreated since."""
        self._current.update(ready.items())
        return list(ready.items()), self.env_group.pop_restarted_env_ids()

    def drain(self) -> None:
        if self._sent:
            ready = self.env_group.collect_async(min_ready=self._sent)
            self._current.update(ready.items())
            self._sent = 0


def record_latencies(timing: Any, resps: Any) -> None:
    """Env -> policy and policy -> buffer latency samples of one step's responses."""
    now = time.time_ns()
    for _, resp in resps.items():
        if hasattr(resp, "ts_env_sent_ns") and hasattr(resp, "ts_policy_sent_ns"):
            timing.add_latency("env_to_policy", (resp.ts_policy_sent_ns - resp.ts_env_sent_ns) / 1e9)
            timing.add_latency("policy_to_buffer", (now - resp.ts_policy_sent_ns) / 1e9)
