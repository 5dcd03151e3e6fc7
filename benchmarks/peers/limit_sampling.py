"""The sampling limit: one gymnasium vector env of all W x N sub-envs + the MLP, in one process.

``--mode vector_entry_point`` is gymnasium's fastest vectorisation for CartPole
(the env's own vectorised implementation); ``--mode sync`` is SyncVectorEnv.
Each step: observations to a tensor, forward pass, categorical sample, env step.
"""

from __future__ import annotations

import _common as c

c.set_threads()

import gymnasium as gym  # noqa: E402
from torch import nn  # noqa: E402


def mlp(inp: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, out))


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mode", default="vector_entry_point"))
    cases = a.cases or [c.sampling_case(w, n) for w, n in c.CASES_SAMPLING]
    for case in cases:
        measure(case, a)


def measure(case: str, a) -> None:
    w, n = c.parse_case(case)
    env = gym.make_vec(c.ENV, num_envs=w * n, vectorization_mode=a.mode)
    c.vector_policy_rate(case, env, mlp(4, 2), a)


if __name__ == "__main__":
    main()
