"""The pixel sampling limit: one SyncVectorEnv of all W x N synthetic pixel envs + the Nature CNN, in one process.

Each step: the uint8 frames to a tensor, the CNN and a linear action head
(rlightning's built-in `NatureCNN`, the network the rlightning side acts with),
a categorical sample, the env step. Nothing is stored.
"""

from __future__ import annotations

import _common as c

c.repo_root_on_path()  # the workers import benchmarks.pixel_env (the env's entry point)
c.set_threads()

import gymnasium as gym  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks.pixel_env import SHAPE, register  # noqa: E402
from rlightning.policy.networks import NatureCNN  # noqa: E402

CASES = ("2x16",)


def measure(case: str, a) -> None:
    w, n = c.parse_case(case)
    env = gym.make_vec(register(), num_envs=w * n, vectorization_mode="sync")
    encoder = NatureCNN(SHAPE)
    c.vector_policy_rate(case, env, nn.Sequential(encoder, nn.Linear(encoder.dim, 6)), a, block=32)


def main() -> None:
    a = c.args()
    for case in a.cases or CASES:
        measure(case, a)


if __name__ == "__main__":
    main()
