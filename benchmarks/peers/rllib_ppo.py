"""RLlib PPO (new API stack) on CartPole-v1 until the mean return of the last 20 episodes is >= 475.

Hyperparameters matched to ``cartpole_ppo`` (see rllib_common.py), at most
150 iterations as the preset. Timed from the built algorithm to the result
that reaches the target, or (``--max-seconds``) the first past the time cap.
"""

from __future__ import annotations

import time

import _common as c

c.set_threads()

import rllib_common as rc  # noqa: E402

TARGET, ITERATIONS = 475.0, 150


def main() -> None:
    a = c.args()
    rc.start_ray()
    algo = rc.ppo_config().debugging(seed=a.seed).build_algo()
    c.begin("solve")
    train_to_target(algo, a.max_seconds, time.perf_counter())
    algo.stop()


def train_to_target(algo, max_seconds: float, t0: float, it: int = 0, res=None) -> None:
    """Train until the target return, ITERATIONS or ``max_seconds`` after ``t0``; report ``solve``.

    ``it`` iterations (the last result ``res``) are already done since ``t0`` (cold start's first one).
    """

    def progress(res) -> tuple:
        runners = res.get("env_runners", {})
        ret = float(runners.get("episode_return_mean", float("nan")) or 0.0)
        return ret, int(runners.get("num_env_steps_sampled_lifetime", 0) or 0)

    ret, steps = progress(res) if res is not None else (0.0, 0)
    # (not ret >= TARGET: a NaN return, before the first episode ends, keeps going)
    while it < ITERATIONS and not ret >= TARGET and not (max_seconds and time.perf_counter() - t0 >= max_seconds):
        it += 1
        ret, steps = progress(algo.train())
    seconds = time.perf_counter() - t0
    c.result(
        "solve",
        [seconds],
        "s",
        env_steps=steps,
        iterations=it,
        final_return=ret,
        solved=ret >= TARGET,
        capped=bool(max_seconds) and ret < TARGET and seconds >= max_seconds,
    )


if __name__ == "__main__":
    main()
