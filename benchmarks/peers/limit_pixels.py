"""The pixel sampling limit: one SyncVectorEnv of all W x N synthetic pixel envs + the Nature CNN, in one process.

Each step: the uint8 frames to a tensor, the CNN and a linear action head
(rlightning's built-in `NatureCNN`, the network the rlightning side acts with),
a categorical sample, the env step. Nothing is stored.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import _common as c

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
c.set_threads()

import gymnasium as gym  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks.pixel_env import SHAPE, register  # noqa: E402
from rlightning.policy.networks import NatureCNN  # noqa: E402

CASES = ("2x16",)


def measure(case: str, a) -> None:
    w, n = c.parse_case(case)
    total = w * n
    env = gym.make_vec(register(), num_envs=total, vectorization_mode="sync")
    obs, _ = env.reset(seed=0)
    encoder = NatureCNN(SHAPE)
    head = nn.Linear(encoder.dim, 6)
    state = {"obs": obs}

    def steps(k: int = 32) -> int:
        o = state["obs"]
        for _ in range(k):
            with torch.no_grad():
                logits = head(encoder(torch.as_tensor(o)))
                action = torch.distributions.Categorical(logits=logits).sample()
            o, _, _, _, _ = env.step(action.numpy())
        state["obs"] = o
        return k * total

    c.begin(case)
    c.result(case, c.timed_rate(steps, a.seconds, a.repeats), "env steps/s")
    env.close()


def main() -> None:
    a = c.args()
    for case in a.cases or CASES:
        measure(case, a)


if __name__ == "__main__":
    main()
