"""The Ray floor: what Ray's call overhead alone costs a sampler that steps env workers as Ray actors.

rlightning's Ray rollout makes one actor call per env worker per step (actions
in, an `EnvRet` of that worker's sub-envs out) and resolves them together. The
floor makes the same calls, with the same payloads, to `EchoWorker` actors
that do no env work: they return a ready-made `EnvRet` of the same shapes. No
Ray-based sampler with that call pattern can step faster than this on the
machine. Used by ``benchmarks/env.py`` and the ``sampling`` item of
``benchmarks/run``.

The actor class lives in this module, so Ray's workers must be able to import
``benchmarks.ray_floor``: put the repository root on ``PYTHONPATH`` before Ray
starts (both users do).
"""

from __future__ import annotations

from typing import Callable, List, Sequence, Tuple

import numpy as np

from rlightning.types import EnvRet, PolicyResponse

RING = 64  # distinct action payloads replayed in turn (drawn before timing)


class EchoWorker:
    """A Ray actor that answers a step with a ready-made CartPole-shaped EnvRet: the bare Ray round trip."""

    def __init__(self, env_id: str, num_envs: int, obs_dim: int = 4) -> None:
        self.env_ret = EnvRet(
            env_id=env_id,
            observation=np.zeros((num_envs, obs_dim), dtype=np.float32),
            last_reward=np.ones(num_envs, dtype=np.float32),
            last_terminated=np.zeros(num_envs, dtype=bool),
            last_truncated=np.zeros(num_envs, dtype=bool),
            info={"episode_return": np.zeros(num_envs), "episode_length": np.zeros(num_envs, dtype=np.int64)},
        )

    def step(self, policy_resp: PolicyResponse) -> EnvRet:
        """Return the EnvRet, whatever the action."""
        return self.env_ret


def action_ring(specs: Sequence[Tuple[str, int]], size: int = RING, seed: int = 0) -> List[List[PolicyResponse]]:
    """``size`` rounds of random discrete actions, one `PolicyResponse` per (env id, sub-envs) in ``specs``."""
    rng = np.random.default_rng(seed)
    return [
        [PolicyResponse(env_id, action=rng.integers(0, 2, size=n, dtype=np.int64)) for env_id, n in specs]
        for _ in range(size)
    ]


def floor_stepper(
    specs: Sequence[Tuple[str, int]], num_cpus: float = 1.0
) -> Tuple[Callable[[int], None], Callable[[], None]]:
    """One `EchoWorker` actor per (env id, sub-envs) in ``specs``; returns ``(step(k), stop())``.

    ``step(k)`` is one floor step: every actor called once with round ``k`` of the action ring, the
    results resolved together with one ``ray.get`` (as `EnvGroup.step` does). Ray must be running.
    """
    import ray

    cls = ray.remote(num_cpus=num_cpus)(EchoWorker)
    actors = [cls.remote(env_id, n) for env_id, n in specs]
    ring = action_ring(specs)
    ray.get([a.step.remote(r) for a, r in zip(actors, ring[0])])  # actors up before any timing

    def step(k: int) -> None:
        ray.get([a.step.remote(r) for a, r in zip(actors, ring[k % len(ring)])])

    def stop() -> None:
        for a in actors:
            ray.kill(a)

    return step, stop
