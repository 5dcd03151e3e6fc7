"""RLlib sampling: W remote EnvRunners x N sub-envs, PPO's sampling phase (``synchronous_parallel_sample``).

A timed call collects 128 steps per sub-env from every EnvRunner (as PPO's
``training_step`` does with a W x N x 128 train batch) and counts the env
steps in the returned episodes.
"""

from __future__ import annotations

import _common as c

c.set_threads()

import rllib_common as rc  # noqa: E402

FRAGMENT = 128


def main() -> None:
    a = c.args()
    cases = a.cases or [c.sampling_case(w, n) for w, n in c.CASES_SAMPLING]
    rc.start_ray()
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample

    for case in cases:
        measure(case, a, synchronous_parallel_sample)


def measure(case: str, a, synchronous_parallel_sample, name: str = "", config=None, fragment: int = FRAGMENT) -> None:
    """Time PPO's sampling phase for ``case`` (W x N) with ``config`` (default: the CartPole config)."""
    w, n = c.parse_case(case)
    config = config or rc.ppo_config(num_env_runners=w, num_envs=n, fragment=fragment)
    algo = config.build_algo()
    group = algo.env_runner_group

    def sample() -> int:
        episodes = synchronous_parallel_sample(
            worker_set=group, max_env_steps=w * n * fragment, sample_timeout_s=300, _uses_new_env_runners=True
        )
        return sum(len(e) for e in episodes)

    sample()
    c.begin(name or case)
    c.result(name or case, c.timed_rate(sample, a.seconds, a.repeats), "env steps/s")
    algo.stop()


if __name__ == "__main__":
    main()
