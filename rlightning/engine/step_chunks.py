"""`StepChunks`: the per-step layout's steps gathered into one ``[N, T]`` record per env worker.

The per-step layout learns each step's EnvRets and responses in the driver.
Instead of one ``[N]`` record per worker and step, each step is written (one
numpy assignment per key) into a preallocated `RecordWriter` per env worker,
and the rollout is stored as one ``[N, T]`` record per worker, the same shape
the env-worker layout stores. A worker that was recreated mid-rollout has the
steps before it stored and starts a new record from its reset EnvRet.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Sequence

from rlightning.env.utils.episodes import EpisodeIds
from rlightning.env.utils.record_writer import RecordWriter, arrays_to_record, start_done_flags
from rlightning.types import BatchedData
from rlightning.types.record import response_arrays

__all__ = ["StepChunks"]


class StepChunks:
    """Writers of one rollout of ``num_steps`` steps, one per env worker: the sink of the driver's rollout loop
    (`rlightning.env.rollout_loop.run_rollout`).

    Args:
        env_rets: The EnvRets the rollout starts from (env id -> EnvRet).
        num_steps: T.
        ids_of: env id, EnvRet -> that env's `EpisodeIds` (kept by the collector across rollouts).
        store: Called with the finished records (a list of ``[N, t]`` TensorDicts) to store them.
        on_restarted: Called after each write with the env ids restarted since the last one (the collector
            truncates their episodes in flight).
        bootstrap: False: `wants_value` is always False (the learner computes its own values of ``next.obs``).
    """

    def __init__(
        self,
        env_rets: BatchedData,
        num_steps: int,
        ids_of: Callable[[str, Any], EpisodeIds],
        store: Callable[[List[Any]], None],
        on_restarted: Callable[[Sequence[str]], None],
        bootstrap: bool = True,
    ) -> None:
        self.num_steps = int(num_steps)
        self.bootstrap = bool(bootstrap)
        self._ids_of = ids_of
        self._store = store
        self._on_restarted = on_restarted
        self._writers: Dict[str, RecordWriter] = {}
        self._steps: Dict[str, int] = {}
        for env_id, ret in env_rets.items():
            self._start(env_id, ret, self.num_steps)

    def _start(self, env_id: str, ret: Any, steps: int) -> None:
        self._ids_of(env_id, ret)
        n = start_done_flags(ret).shape[0]
        self._writers[env_id] = RecordWriter(env_id, n, steps, ret.observation, start_done_flags(ret))
        self._steps[env_id] = 0

    def write(self, items: Sequence[tuple], restarted: Sequence[str]) -> None:
        """The answered steps ``(env id, t, response, next EnvRet)``; stores the records of restarted workers.

        A restarted worker's next EnvRet is its reset: its steps so far become a record (stored before its
        episodes are truncated) and a new writer starts from the reset for the steps left.
        """
        done: List[Any] = []
        for env_id, t, resp, nxt in items:
            writer = self._writers.get(env_id)
            if writer is None:
                continue
            if env_id in restarted:
                record = self._finish(env_id)
                if record is not None:
                    done.append(record)
                left = self.num_steps - t - 1
                if left > 0:
                    self._start(env_id, nxt, left)
                continue
            out = response_arrays(resp, env_id, writer.num_envs)
            writer.write_ret(self._steps[env_id], out, nxt)
            self._steps[env_id] += 1
        if done:
            self._store(done)
        self._on_restarted(restarted)

    def _finish(self, env_id: str, last_value: Any = None) -> Any:
        writer = self._writers.pop(env_id)
        steps = self._steps.pop(env_id)
        if not steps:
            return None
        return arrays_to_record(writer.finish(self._ids_of(env_id, None), steps, last_value=last_value), env_id)

    def wants_value(self, env_id: str) -> bool:
        """True when that worker's responses carry ``value`` (its record then needs the last one)."""
        writer = self._writers.get(env_id)
        return self.bootstrap and writer is not None and writer.extras is not None and "value" in writer.extras

    def finish(self, values: Dict[str, Any]) -> None:
        """Store the ``[N, T]`` records of every worker (the steps written), in worker order; ``values``: env id
        -> the value of its current EnvRet (each record's last ``next.value``)."""
        records = (self._finish(env_id, values.get(env_id)) for env_id in list(self._writers))
        done = [r for r in records if r is not None]
        if done:
            self._store(done)
