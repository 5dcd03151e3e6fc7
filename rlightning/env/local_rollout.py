"""Local env workers as the rollout loop's streams and sink: `collect_local` (see `rlightning.env.rollout_loop`).

The workers of this process are stepped one after another with the outputs of one acting copy; each answered
step is written straight into its worker's record. `RolloutWorker.collect` runs it for one worker, the env group
for several that `can_step_together`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlightning.env.errors import caller_error, is_caller_error
from rlightning.env.rollout_loop import CopyActor, run_rollout
from rlightning.env.rollout_worker import RolloutResult, RolloutWorker, _portable_error, _Rollout
from rlightning.env.utils.episodes import episode_report
from rlightning.env.utils.multi_agent_writer import agent_episode_report
from rlightning.env.utils.record_writer import RecordWriter
from rlightning.env.utils.tensor_record_writer import TensorRecordWriter
from rlightning.types import PolicyResponse

__all__ = ["collect_local"]


class _LocalStreams:
    """Env workers in this process as the rollout loop's streams (stepped one after another) and as the sink of
    their own runs: `step` steps each worker's env, `write` writes each answered step into its worker's record
    and counts the episodes that ended."""

    def __init__(self, workers: Sequence[RolloutWorker], runs: Sequence[_Rollout]) -> None:
        self._of = {w.env_id: (w, run) for w, run in zip(workers, runs)}
        self._last: Dict[str, Dict[str, Any]] = {}
        self.actor: Optional[CopyActor] = None

    def ids(self) -> List[str]:
        return list(self._of)

    def rows(self, env_id: str) -> int:
        return self._of[env_id][0].num_envs

    def current(self, env_id: str) -> Any:
        return self._of[env_id][1].env_ret

    def step(self, ids: Sequence[str], outs: Sequence[Dict[str, Any]]) -> Tuple[List[Tuple[str, Any]], Sequence[str]]:
        """Step each worker's env with its outputs (``action`` and extras, ``[N, ...]``), one after another. An
        exception of the env's own ``step`` ends that worker's run (its ``error``; answered None); the caller's
        errors are raised."""
        answered = []
        for env_id, out in zip(ids, outs):
            worker, run = self._of[env_id]
            try:
                env_ret = worker.env.step(PolicyResponse(env_id, weight_version=run.version, **out))
            except Exception as err:  # noqa: BLE001 - the env's own failure ends the run; the group recreates it
                if is_caller_error(err):
                    raise
                run.error = _portable_error(err, env_id)
                env_ret = None
            else:
                worker._current = run.env_ret = env_ret  # whatever fails next, the env moved on
            answered.append((env_id, env_ret))
        return answered, ()

    def write(self, items: Sequence[tuple], restarted: Sequence[str]) -> None:
        """Write step ``t`` of each item: the outputs acted on and the EnvRet the env answered; count the episodes
        that ended."""
        count = np.count_nonzero
        for env_id, t, out, env_ret in items:
            run = self._of[env_id][1]
            writer, term, trunc = run.writer, env_ret.last_terminated, env_ret.last_truncated
            plain = type(writer) is RecordWriter
            try:
                if plain:
                    writer.write_step(t, out, env_ret.observation, env_ret.last_reward, term, trunc)
                else:
                    writer.write_ret(t, out, env_ret)
            except (KeyError, TypeError, ValueError) as err:
                caller_error(err)
                raise
            if plain and type(term) is np.ndarray and type(trunc) is np.ndarray:
                if count(term) or count(trunc):  # (a third of ``(term | trunc).any()``'s time, every step)
                    returns, lengths = episode_report(env_ret, term | trunc)
                    run.result.episode_returns.extend(returns)
                    run.result.episode_lengths.extend(lengths)
            elif type(writer) is not TensorRecordWriter and (np.any(term) or np.any(trunc)):
                # a device-resident env's episodes are read once, in finish_rollout (no host sync per step)
                returns, lengths = episode_report(env_ret)
                run.result.episode_returns.extend(returns)
                run.result.episode_lengths.extend(lengths)
                if not plain:
                    for agent, got in agent_episode_report(env_ret).items():
                        run.result.agent_episode_returns.setdefault(agent, []).extend(got)
            run.steps = t + 1
            self._last[env_id] = out

    def wants_value(self, env_id: str) -> bool:
        run = self._of[env_id][1]
        return not run.defer_value and run.error is None and "value" in self._last.get(env_id, ())

    def finish(self, values: Dict[str, Any]) -> None:
        deferred = False
        for env_id, (worker, run) in self._of.items():
            if run.defer_value:
                worker.fill_values(run, self.actor.policy)
                deferred = True
            elif env_id in values:
                run.last_value = values[env_id]
        if deferred and self.actor is not None:
            self.actor.count(sum(w.num_envs for w, _ in self._of.values()))


def collect_local(workers: Sequence[RolloutWorker], num_steps: int) -> List[RolloutResult]:
    """Collect ``num_steps`` steps in each of the local ``workers``, acting with worker 0's policy copy.

    One worker (`RolloutWorker.collect`), or several that `can_step_together` (one forward pass per step for
    all their rows; each worker's inference and env seconds are its share of the rows). A worker whose env
    raises stops there (its result holds the steps before, with ``error`` set) while the others go on.

    Returns:
        One `RolloutResult` per worker, in order.

    Raises:
        What `RolloutWorker.collect` raises.
    """
    runs = [w.start_rollout(num_steps) for w in workers]
    policy = workers[0].policy
    defer = all(run.defer_value for run in runs)  # the values of every observation when the rollout ends
    for run in runs:
        run.defer_value = defer
    rows = {w.env_id: w.num_envs for w in workers}
    actor = CopyActor(policy, rows, fast=workers[0].acts_on_observations, defer=defer)
    streams = _LocalStreams(workers, runs)
    streams.actor = actor
    times = run_rollout(streams, actor, streams, runs[0].num_steps)
    total = sum(rows.values()) or 1
    for w, run in zip(workers, runs):
        run.inference += times.inference_of[w.env_id]
        run.stepping += (times.env_step + times.write) * rows[w.env_id] / total
    return [w.finish_rollout(run) for w, run in zip(workers, runs)]
