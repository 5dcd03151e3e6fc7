"""TorchRL pixel sampling: ``MultiSyncCollector`` over W worker processes, each with N synthetic pixel sub-envs.

The env is `benchmarks.pixel_env.SyntheticPixels` (84x84x4 uint8 frames); each
worker's env is a ``SyncVectorEnv`` of N sub-envs with same-step autoreset
(TorchRL 0.14 refuses next-step autoreset) wrapped by ``GymWrapper``. The policy
is the Nature CNN (three convolutions and a 512-unit layer, frames scaled by
1/255 inside the network, as rlightning's built-in ``NatureCNN``) and a linear
head to 6 logits, as a ``ProbabilisticActor``. A timed call is one collector
batch of W x N x 32 frames (rlightning's pixel rollout is 32 steps per sub-env).
"""

from __future__ import annotations

import functools
import os
import sys

import _common as c

c.repo_root_on_path()  # the workers import benchmarks.pixel_env (the env's entry point)
c.set_threads()

import gymnasium as gym  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.collectors import MultiSyncCollector  # noqa: E402
from torchrl.envs import GymWrapper  # noqa: E402
from torchrl.modules import OneHotCategorical, ProbabilisticActor  # noqa: E402

from benchmarks.pixel_env import register  # noqa: E402

CASES = ("2x16",)
FRAGMENT = 32
_KEEP: list = []


class NatureCNNPolicy(nn.Module):
    """84x84x4 uint8 (channels last) -> 6 logits: the Nature DQN encoder and a linear head."""

    def __init__(self, actions: int = 6) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 512),
            nn.ReLU(),
            nn.Linear(512, actions),
        )

    def forward(self, obs):
        lead = obs.shape[:-3]
        x = obs.reshape(-1, *obs.shape[-3:]).permute(0, 3, 1, 2).float() / 255.0
        return self.net(x).reshape(*lead, -1)


def _make(n: int):
    env = gym.make_vec(
        register(), num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
    )
    return GymWrapper(env)


def make_env(n: int):
    return functools.partial(_make, n)  # picklable: the workers are spawned processes


def make_policy(env):
    module = TensorDictModule(NatureCNNPolicy(), in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(
        module, in_keys=["logits"], distribution_class=OneHotCategorical, spec=env.action_spec, return_log_prob=True
    )


def next_numel(batches) -> int:
    return next(batches).numel()


def main() -> None:
    a = c.args()
    for case in a.cases or CASES:
        w, n = c.parse_case(case)
        probe = make_env(n)()
        policy = make_policy(probe)
        probe.close()
        collector = MultiSyncCollector(
            [make_env(n)] * w,
            policy,
            frames_per_batch=w * n * FRAGMENT,
            total_frames=-1,
            num_threads=1,
            cat_results="stack",
        )
        collect = functools.partial(next_numel, iter(collector))
        collect()
        c.begin(case)
        c.result(case, c.timed_rate(collect, a.seconds, a.repeats), "env steps/s")
        collector.shutdown()
        _KEEP.append(collector)  # see torchrl_sampling.py: no collector finalizer runs mid-benchmark
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
