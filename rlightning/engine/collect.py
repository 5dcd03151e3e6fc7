"""The rollout loops of the engines: per step through the policy group, or whole rollouts in the env workers.

``cluster.inference="eval_workers"``: every step the policy group answers the
env workers' EnvRets, the pair goes into the buffer and the env workers step
(`collect_steps`). ``"env_workers"``: every env worker steps the whole rollout
with its own policy copy and returns it in one call; the driver adds each
worker's chunk to the buffer as soon as it arrives, while the others still run
(`collect_chunks`).
"""

from __future__ import annotations

import time
from typing import Any, Dict

from rlightning.types import BatchedData
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)


def collect_steps(engine: Any, num_steps: int) -> int:
    """Step every env worker ``num_steps`` times, one policy-group call per step; returns env steps."""
    steps = 0
    for _ in range(num_steps):
        t0 = time.perf_counter()
        resps = engine.policy_group.rollout_batch(engine._env_rets)
        t1 = time.perf_counter()
        record_latencies(engine, resps)
        engine.buffer.add_batched_transition(engine._env_rets, resps)
        t2 = time.perf_counter()
        engine._env_rets = engine.env_group.step(resps)
        t3 = time.perf_counter()
        truncate_restarted(engine)
        engine.timing.add("inference", t1 - t0)
        engine.timing.add("buffer_add", t2 - t1)
        engine.timing.add("env_step", t3 - t2)
        steps += engine.num_sub_envs
        if engine._stop_requested.is_set():
            break
    return steps


def collect_chunks(engine: Any, num_steps: int) -> int:
    """Every env worker steps ``num_steps`` times with its own policy copy; returns env steps.

    The buffer gets each worker's steps in order, in one call per worker. The
    rollout parts are the workers' own inference and env-step seconds (for Ray
    workers, which run side by side, their mean) and the driver's buffer add.
    """
    group = engine.env_group
    envs_of = {m.env_id: int(m.num_envs or 1) for m in engine.env_metas}
    current = engine._env_rets
    latest: Dict[str, Any] = dict(current.items())
    steps = 0
    inference = env_step = add = 0.0
    chunks = group.collect_rollouts(current, num_steps)
    try:
        for env_id, chunk in chunks:
            latest[env_id] = chunk.last
            if chunk.num_steps:
                t0 = time.perf_counter()
                engine.buffer.add_batched_transition(chunk.env_rets, chunk.policy_resps)
                add += time.perf_counter() - t0
            inference += chunk.inference_s
            env_step += chunk.env_step_s
            steps += chunk.num_steps * envs_of[env_id]
    finally:
        # Whatever failed in the driver, every worker's envs moved on: keep each one's latest EnvRet.
        try:
            for env_id, chunk in chunks:
                latest[env_id] = chunk.last
        except Exception as err:  # noqa: BLE001 - the first error is the one raised
            logger.debug("a rollout chunk was lost after an earlier error: %r", err)
        engine._env_rets = BatchedData(list(current.ids()), [latest[i] for i in current.ids()])
    truncate_restarted(engine)
    # Ray workers run side by side: their mean is the rollout's share; local ones run one after another.
    workers = max(1, len(current)) if group.is_remote else 1
    engine.timing.add("inference", inference / workers)
    engine.timing.add("env_step", env_step / workers)
    engine.timing.add("buffer_add", add)
    return steps


def truncate_restarted(engine: Any) -> None:
    """Truncate the episodes of env workers that were restarted (their episodes in flight are gone)."""
    restarted = engine.env_group.pop_restarted_env_ids()
    if restarted:
        logger.warning("env workers %s were restarted; their episodes in flight are truncated", restarted)
        engine.buffer.truncate_episodes(restarted)


def record_latencies(engine: Any, resps: Any) -> None:
    """Env -> policy and policy -> buffer latency samples of one step's responses."""
    now = time.time_ns()
    for _, resp in resps.items():
        if hasattr(resp, "ts_env_sent_ns") and hasattr(resp, "ts_policy_sent_ns"):
            engine.timing.add_latency("env_to_policy", (resp.ts_policy_sent_ns - resp.ts_env_sent_ns) / 1e9)
            engine.timing.add_latency("policy_to_buffer", (now - resp.ts_policy_sent_ns) / 1e9)
