"""rlightning trained to a published budget, then evaluated: the rlightning side of the off-policy rows.

``--cases dqn_cartpole`` trains the ``cartpole_dqn`` preset (rl-baselines3-zoo's CartPole-v1 DQN
settings) for 50k env steps; ``sac_pendulum`` the ``pendulum_sac`` row of ``benchmarks/learning.py``
(20k). Each case is a row of `benchmarks.learning.ROWS` (`CASES` maps the names, which match
``sb3_learning.py``'s), trained by `benchmarks.learning.run_row`: the wall-clock from the built run
to the end of training, then 10 deterministic evaluation episodes (not timed).
"""

from __future__ import annotations

import sys
from pathlib import Path

import _common as c

c.set_threads()

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.learning import run_row  # noqa: E402

#: case (as in sb3_learning.py) -> row of benchmarks/learning.py.
CASES = {"dqn_cartpole": "cartpole_dqn", "sac_pendulum": "pendulum_sac"}


def main() -> None:
    a = c.args(lambda p: p.add_argument("--episodes", type=int, default=10))
    for case in a.cases or list(CASES):
        c.begin(case)
        res = run_row(CASES[case], a.seed, a.episodes)
        c.result(
            case,
            [res["wall_s"]],
            "s",
            env_steps=res["env_steps"],
            return_mean=res["return_mean"],
            return_std=res["return_std"],
            seed=a.seed,
        )


if __name__ == "__main__":
    main()
