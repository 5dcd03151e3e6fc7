"""rlightning pixel sampling: the engine's rollout phase on 84x84x4 uint8 frames, the Nature CNN acting.

``--mode ray``: env workers as Ray actors acting with their own PPO copy (the
built-in Nature CNN encoder, chosen from the image observation space), one call
per rollout (``cluster.inference=env_workers``); ``--mode local``: the same
workers in this process. The env is `benchmarks.pixel_env.SyntheticPixels`. A
timed call is one ``engine.rollout()`` of 32 steps per worker with the
transitions stored in the rollout buffer; the buffer is emptied between calls, untimed.
"""

from __future__ import annotations

import _common as c

c.repo_root_on_path()  # the workers import benchmarks.pixel_env (the env's entry point)
c.set_threads()

from rlightning_sampling import config, measure  # noqa: E402 - the CartPole rows' config and timed rollout

from benchmarks.pixel_env import register  # noqa: E402

CASES = ("2x16",)
STEPS = 32


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mode", default="ray", choices=["ray", "local"]))
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    for case in a.cases or CASES:
        measure(case, config(a.mode, case, STEPS, (f"env.name={register()}",)), a)
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


if __name__ == "__main__":
    main()
