"""A short installation check: configs, torch, gymnasium, and a Ray actor round trip."""

from __future__ import annotations

import time
from typing import Callable


class _Echo:
    def ping(self, x: int) -> int:
        return x + 1


def run_selfcheck(say: Callable[[str], None]) -> int:
    """Run the checks, reporting each through ``say``; returns 0 when all pass."""
    failures = 0

    def check(name: str, fn: Callable[[], str]) -> None:
        nonlocal failures
        t0 = time.perf_counter()
        try:
            detail = fn()
            say(f"ok    {name:28s} {detail} ({time.perf_counter() - t0:.1f}s)")
        except Exception as err:  # noqa: BLE001 - reported, counted
            failures += 1
            say(f"FAIL  {name:28s} {type(err).__name__}: {err}")

    def config() -> str:
        from rlightning.utils.config import list_presets, load_preset

        names = list_presets()
        for n in names:
            load_preset(n)
        return f"{len(names)} presets valid"

    def torch_check() -> str:
        import torch

        x = torch.randn(64, 64)
        cuda = "yes" if torch.cuda.is_available() else "no"
        return f"torch {torch.__version__}, cuda={cuda}, matmul {float((x @ x).sum()):.1f}"

    def gym_check() -> str:
        import gymnasium as gym

        env = gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="vector_entry_point")
        env.reset(seed=0)
        for _ in range(10):
            env.step(env.action_space.sample())
        env.close()
        return f"gymnasium {gym.__version__}, CartPole-v1 x4 stepped"

    def ray_check() -> str:
        import ray

        from rlightning.utils.ray.launcher import launch_ray_actor
        from rlightning.utils.ray.runtime import acquire_ray, release_ray

        acquire_ray(num_cpus=2, log_to_driver=False)
        try:
            actor = launch_ray_actor(_Echo, options={"num_cpus": 0.5})
            value = ray.get(actor.ping.remote(41), timeout=120)
            ray.kill(actor)
            return f"ray {ray.__version__}, actor answered {value}"
        finally:
            release_ray()

    check("configs and presets", config)
    check("torch", torch_check)
    check("gymnasium", gym_check)
    check("ray local runtime + actor", ray_check)
    say("selfcheck passed" if failures == 0 else f"selfcheck: {failures} check(s) failed")
    return 0 if failures == 0 else 1
