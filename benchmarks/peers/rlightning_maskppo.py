"""rlightning PPO with an action mask against the same PPO without one: env steps/s of whole iterations.

The env is `benchmarks.mask_env.MaskedChoice` (8 actions, half allowed each step, a Dict observation
``{"observation": Box(8), "action_mask": MultiBinary(8)}``); ``--mask off`` drops the ``action_mask`` key
(the same env otherwise). The PPO is ``cartpole_ppo``'s (MLP 64-64 tanh, 128 steps per rollout, 4 epochs of
4 minibatches), env workers acting with their policy copies. Cases: ``local 2x8`` (2 env workers x 8 sub-envs
in this process, in lock step) and ``ray 2x8`` (the same as Ray actors). A repeat: env steps per second of
whole ``engine.step()`` iterations (rollout, GAE, learning, weight sync) over a window, after one warm-up
iteration.
"""

from __future__ import annotations

import os

import _common as c

c.repo_root_on_path()  # Ray's env workers import benchmarks.mask_env (the env's entry point)
c.set_threads()

from benchmarks.mask_env import ENTRY_POINT  # noqa: E402

CASES = ("local 2x8", "ray 2x8")
STEPS = 128


def build(case: str, mask: bool):
    """The engine of ``case`` (``"<local|ray> WxN"``), with the mask key in the observation or without it."""
    from rlightning.utils.builders import build_run
    from rlightning.utils.config import apply_overrides, load_preset

    mode, layout = case.split()
    w, n = c.parse_case(layout)
    cfg = apply_overrides(
        load_preset("cartpole_ppo"),
        [
            f"env.name={ENTRY_POINT}",
            f"env.env_kwargs={{expose_mask: {str(mask).lower()}}}",
            f"env.num_workers={w}",
            f"env.num_envs={n}",
            f"cluster.remote_env={str(mode == 'ray').lower()}",
            "cluster.inference=env_workers",
            f"train.rollout_steps={STEPS}",
            f"buffer.capacity={STEPS * w * n}",
            "train.target_return=null",
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
        ],
    )
    return build_run(cfg).engine


def iteration_of(engine):
    """One whole iteration of ``engine``; returns the env steps it collected."""

    def iteration() -> int:
        before = engine.env_steps
        engine.step()
        return engine.env_steps - before

    return iteration


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mask", default="on", choices=["on", "off"]))
    cases = a.cases or list(CASES)
    remote = any(x.startswith("ray") for x in cases)
    if remote:
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    for case in cases:
        engine = build(case, a.mask == "on")
        c.begin(case)
        rates = c.timed_rate(iteration_of(engine), a.seconds, a.repeats)
        c.result(case, rates, "env steps/s", env_steps=engine.env_steps)
        engine.close()
    if remote:
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


if __name__ == "__main__":
    main()
