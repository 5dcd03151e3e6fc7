"""Local env workers collecting together: one forward pass of one policy copy per step for all of them.

Env workers in the calling process run one after another; acting for each
separately costs one forward pass per worker per step. When every worker acts
straight through ``compute_actions`` on array observations of one shape with
the same synced weights, the
group steps them in lock step instead: per step, the workers' observations are
concatenated, worker 0's copy (every copy holds the same weights) computes the
actions of all rows at once, and each worker steps its env with its rows and
writes its own record. Ray workers are never stepped this way (each acts in its
own process, side by side).
"""

from __future__ import annotations

import time
from typing import Any, List, Sequence, Tuple

import numpy as np

from rlightning.env.errors import caller_error
from rlightning.env.rollout_worker import RolloutResult

__all__ = ["can_step_together", "collect_together"]


def can_step_together(workers: Sequence[Any]) -> bool:
    """True when the local ``workers`` can share one forward pass per step (see the module docstring)."""
    if len(workers) < 2 or not all(w.acts_on_observations and w.weights_synced for w in workers):
        return False  # copies that were never synced hold their own initial weights
    versions = {int(w.policy.weight_version) for w in workers}
    if len(versions) != 1 or len({bool(w.policy.deterministic) for w in workers}) != 1:
        return False
    shapes = set()
    for w in workers:
        current = w.current_env_ret
        obs = getattr(current, "observation", None)
        if type(obs) is not np.ndarray or obs.ndim < 1 or obs.shape[0] != w.num_envs:
            return False
        shapes.add((obs.shape[1:], obs.dtype))
    return len(shapes) == 1


def _rows_plan(active: Sequence[Any]) -> Tuple[List[tuple], int]:
    """Per (worker, run) of ``active``: its rows of the batch (a slice) and its share of them; and the total."""
    total = sum(w.num_envs for w, _ in active)
    plan, start = [], 0
    for w, run in active:
        plan.append((w, run, slice(start, start + w.num_envs), w.num_envs / max(total, 1)))
        start += w.num_envs
    return plan, total


def collect_together(workers: Sequence[Any], num_steps: int) -> List[RolloutResult]:
    """Collect ``num_steps`` steps in every worker with one forward pass per step (see `can_step_together`).

    Each worker's inference seconds are its share of the rows. A worker whose env raises stops there (its
    result holds the steps before, with ``error`` set) while the others go on. Raises what
    `RolloutWorker.collect` raises.
    """
    policy = workers[0].policy
    count = getattr(policy, "count_rollout", None)  # what rollout_batch would have counted
    runs = [w.start_rollout(num_steps) for w in workers]
    active = list(zip(workers, runs))
    clock = time.perf_counter
    plan, total = _rows_plan(active)
    defer = all(run.defer_value for run in runs)  # the values of every observation when the rollout ends
    for run in runs:
        run.defer_value = defer
    for _ in range(runs[0].num_steps):
        if not active:
            break
        t0 = clock()
        obs = np.concatenate([run.env_ret.observation for _, run in active], axis=0)
        try:
            if defer:
                out = policy.compute_actions(obs, deterministic=policy.deterministic, with_value=False)
            else:
                out = policy.compute_actions(obs, deterministic=policy.deterministic)
            if count is not None:
                count(total)
        except Exception as err:  # noqa: BLE001 - the policy's failure is the caller's: never a restart
            caller_error(err)
            raise
        spent = clock() - t0
        items = out.items()
        dropped = False
        for w, run, rows, share in plan:
            run.inference += spent * share
            if not w.step_rollout(run, {k: v[rows] for k, v in items}):
                dropped = True
        if dropped:  # a worker whose env raised stops there; the others go on
            active = [(w, run) for w, run in active if run.error is None]
            plan, total = _rows_plan(active)
    if defer:  # every worker's values, those whose env raised included, with worker 0's copy
        for w, run in zip(workers, runs):
            w.fill_values(run, policy)
        if count is not None:
            count(total)
    elif active and "value" in out:  # the value of each last next.obs: its bootstrap
        obs = np.concatenate([run.env_ret.observation for _, run in active], axis=0)
        value = policy.compute_actions(obs, deterministic=True)["value"]
        if count is not None:
            count(len(obs))
        start = 0
        for w, run in active:
            run.last_value = value[start : start + w.num_envs]
            start += w.num_envs
    return [w.finish_rollout(run) for w, run in zip(workers, runs)]
