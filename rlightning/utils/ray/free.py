"""Waiting for Ray to give back the resources of actors just stopped.

``ray.kill`` returns before the raylet has freed the actor's CPUs and GPUs; a build that checks
``ray.available_resources()`` right after would see them still held. `wait_until_free` polls until
the resources the stopped actors held are back (or a timeout passes).

    before = free_resources()
    stop_actors()
    wait_until_free({"CPU": 2.0}, before)
"""

from __future__ import annotations

import time
from typing import Dict, Optional

from rlightning.utils.logger import get_logger
from rlightning.utils.ray.launcher import import_ray

logger = get_logger(__name__)

#: Resource kinds the wait looks at (the kinds `Lab.build` checks).
KINDS = ("CPU", "GPU")


def free_resources() -> Dict[str, float]:
    """The cluster's free CPUs and GPUs now ({} when Ray is not initialised)."""
    ray = import_ray()
    if not ray.is_initialized():
        return {}
    avail = ray.available_resources()
    return {k: float(avail.get(k, 0.0)) for k in KINDS}


def wait_until_free(
    released: Dict[str, float], before: Optional[Dict[str, float]], timeout_s: float = 30.0, poll_s: float = 0.05
) -> bool:
    """Wait until the cluster's free resources have grown by ``released`` since ``before``.

    The goal is capped at the cluster's total (the freed share cannot exceed it).

    Args:
        released: CPUs and GPUs the stopped actors held (``{"CPU": 2.0}``).
        before: `free_resources` taken before they were stopped; None or {} waits for nothing.
        timeout_s: Give up after this many seconds (logged; returns False).
        poll_s: Seconds between looks.

    Returns:
        True once the resources are free (at once when nothing was held), False on timeout.
    """
    if not before or not any(released.get(k, 0.0) > 0 for k in KINDS):
        return True
    ray = import_ray()
    if not ray.is_initialized():
        return True
    total = ray.cluster_resources()
    goal = {k: min(float(total.get(k, 0.0)), before.get(k, 0.0) + released.get(k, 0.0)) for k in KINDS}
    deadline = time.monotonic() + timeout_s
    while True:
        now = free_resources()
        if all(now.get(k, 0.0) >= goal[k] - 1e-6 for k in KINDS):
            return True
        if time.monotonic() >= deadline:
            logger.warning(
                "stopped actors' resources %s not yet free after %gs (free now: %s); a build may not fit yet",
                {k: v for k, v in released.items() if v},
                timeout_s,
                now,
            )
            return False
        time.sleep(poll_s)
