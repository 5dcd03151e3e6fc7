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
    algo = rc.ppo_config().debugging(seed=1).build_algo()
    c.begin("solve")
    t0 = time.perf_counter()
    ret, steps, it = 0.0, 0, 0
    while it < ITERATIONS:
        it += 1
        res = algo.train()
        runners = res.get("env_runners", {})
        ret = float(runners.get("episode_return_mean", float("nan")) or 0.0)
        steps = int(runners.get("num_env_steps_sampled_lifetime", 0) or 0)
        if ret >= TARGET or (a.max_seconds and time.perf_counter() - t0 >= a.max_seconds):
            break
    seconds = time.perf_counter() - t0
    c.result(
        "solve",
        [seconds],
        "s",
        env_steps=steps,
        iterations=it,
        final_return=ret,
        solved=ret >= TARGET,
        capped=bool(a.max_seconds) and ret < TARGET and seconds >= a.max_seconds,
    )
    algo.stop()


if __name__ == "__main__":
    main()
