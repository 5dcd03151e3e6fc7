"""Pipelined stepping of the per-step layout: each env worker's next step is submitted as soon as its EnvRet is in.

The lock-step loop (`Collector.collect_steps` with one worker, or local workers)
acts on every worker's EnvRet, steps every worker and waits for all of them
before acting again: the driver idles during the slowest worker's round trip,
and the workers idle while the driver acts and writes. With two or more Ray env
workers `collect_pipelined` keeps a step in flight per worker instead (the way
an asynchronous vector env does): it waits for whichever worker answers first,
acts on its EnvRet (one policy-group call), submits its next step at once, and
only then writes the answered step into the rollout's `StepChunks`, while every
worker's next step runs. It does not ask which other workers are ready too: on
Ray that is one more ``ray.wait`` per answer, as costly as a step's call.

Each worker's record is what the lock-step loop stores: the same steps, in the
same order (for a deterministic policy, the same actions; a stochastic policy's
draws come in another order across workers). A worker that died or whose env
raised comes back with its reset EnvRet (`EnvGroup.collect_async` recreates it);
its steps so far are stored and its episodes in flight truncated, as in the
lock-step loop. After a stop request no new step is submitted: the steps in
flight are awaited and written, then the loop ends.
"""

from __future__ import annotations

import time
from typing import Any, Dict, List

from rlightning.engine.step_chunks import StepChunks
from rlightning.env.utils.record_writer import start_done_flags
from rlightning.types import BatchedData

__all__ = ["collect_pipelined"]


def collect_pipelined(collector: Any, chunks: StepChunks, num_steps: int) -> int:
    """Step every env worker of ``collector`` up to ``num_steps`` times, one step in flight per worker.

    Args:
        collector: The `Collector` (its env group, policy group, buffer, timing, EnvRets and stop flag).
        chunks: The rollout's writers, started from ``collector.env_rets``.
        num_steps: Steps per worker.

    Returns:
        Env steps taken (sub-environments times steps, summed over workers). ``collector.env_rets`` holds
        every worker's current EnvRet, in worker order, when it returns (also after an error).
    """
    from rlightning.engine.collect import record_latencies

    envs = collector.env_group
    timing = collector.timing
    order = list(collector.env_rets.ids())
    current: Dict[str, Any] = dict(collector.env_rets.items())
    sizes = {env_id: int(start_done_flags(ret).shape[0]) for env_id, ret in current.items()}
    done = {env_id: 0 for env_id in order}  # steps finished per worker
    sent: Dict[str, Any] = {}  # env id -> the response of its step in flight
    steps = 0
    inference = env_step = add = 0.0

    def submit(ids: List[str]) -> None:
        nonlocal inference
        if not ids:
            return
        t0 = time.perf_counter()
        resps = collector.policy_group.rollout_batch(BatchedData(ids, [current[i] for i in ids]))
        inference += time.perf_counter() - t0
        record_latencies(timing, resps)
        envs.step_async(resps)
        sent.update(resps.items())

    try:
        submit(order if num_steps > 0 else [])
        while sent:
            t0 = time.perf_counter()
            # The first step in only: asking Ray which others are ready too (one more ray.wait) cost the
            # per-step layout 3-4 % at 2x64, and the step submitted last is rarely done by then.
            ready = envs.collect_async(min_ready=1, gather_ready=False)
            restarted = envs.pop_restarted_env_ids()
            t1 = time.perf_counter()
            env_step += t1 - t0
            answered = [(env_id, sent.pop(env_id), nxt, done[env_id]) for env_id, nxt in ready.items()]
            again = []
            for env_id, _, nxt, t in answered:
                current[env_id] = nxt
                done[env_id] = t + 1
                steps += sizes[env_id]
                if t + 1 < num_steps:
                    again.append(env_id)
            if not collector.stop_event.is_set():
                # Worker order among those answered together, so a seeded run acts in the same order.
                submit([i for i in order if i in again])
            # The answered steps are written while the next ones run.
            t2 = time.perf_counter()
            for env_id, resp, nxt, t in answered:
                lost = chunks.write(BatchedData([env_id], [resp]), BatchedData([env_id], [nxt]), restarted, t)
                if lost:
                    collector.buffer.add_rollouts(lost)
            collector.truncate_restarted(restarted)
            add += time.perf_counter() - t2
    finally:
        if sent:  # an error while steps were in flight: let them finish so the group can be used again
            try:
                envs.collect_async(min_ready=len(sent))
                collector.truncate_restarted()
            except Exception:  # noqa: BLE001 - the first error is the one raised
                pass
        collector.env_rets = BatchedData(order, [current[i] for i in order])
        timing.add("inference", inference)
        timing.add("env_step", env_step)
        timing.add("buffer_add", add)
    return steps
