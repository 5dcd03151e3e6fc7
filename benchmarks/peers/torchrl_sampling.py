"""TorchRL sampling: ``MultiSyncCollector`` over W worker processes, each with N CartPole-v1 sub-envs.

Each worker's env is a ``SyncVectorEnv`` of N sub-envs with same-step
autoreset wrapped by ``GymWrapper``: TorchRL 0.14 refuses next-step autoreset,
the only mode of CartPole's own vector env, and ``GymEnv(num_envs=N)`` would
start N subprocesses per worker. The policy is the same MLP
(4 -> 64 -> 64 -> 2, tanh) as a ``ProbabilisticActor`` with a categorical
distribution. A timed call is one collector batch of W x N x 128 frames.
"""

from __future__ import annotations

import functools
import os
import sys

import _common as c

c.set_threads()

import gymnasium as gym  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402
from torchrl.collectors import MultiSyncCollector  # noqa: E402
from torchrl.envs import GymWrapper  # noqa: E402
from torchrl.modules import OneHotCategorical, ProbabilisticActor  # noqa: E402

FRAGMENT = 128
_KEEP: list = []


def _make(n: int):
    # TorchRL needs same-step autoreset, which CartPole's own vector env (next-step only) lacks.
    env = gym.make_vec(
        c.ENV, num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}
    )
    return GymWrapper(env)


def make_env(n: int):
    return functools.partial(_make, n)  # picklable: the workers are spawned processes


def make_policy(env):
    net = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
    return ProbabilisticActor(
        module,
        in_keys=["logits"],
        distribution_class=OneHotCategorical,
        spec=env.action_spec,
        return_log_prob=True,
    )


def next_numel(batches) -> int:
    return next(batches).numel()


def main() -> None:
    a = c.args()
    cases = a.cases or [c.sampling_case(w, n) for w, n in c.CASES_SAMPLING]
    for case in cases:
        w, n = c.parse_case(case)
        probe = make_env(n)()
        policy = make_policy(probe)
        probe.close()
        frames = w * n * FRAGMENT
        collector = MultiSyncCollector(
            [make_env(n)] * w, policy, frames_per_batch=frames, total_frames=-1, num_threads=1, cat_results="stack"
        )
        collect = functools.partial(next_numel, iter(collector))
        collect()
        c.begin(case)
        c.result(case, c.timed_rate(collect, a.seconds, a.repeats), "env steps/s")
        collector.shutdown()
        # Kept alive to the end: TorchRL 0.14's weight-sync scheme can deadlock when its __del__ runs
        # from the garbage collector while the next case's collector starts threads.
        _KEEP.append(collector)
    sys.stdout.flush()
    os._exit(0)  # skip TorchRL's finalizers for the same reason


if __name__ == "__main__":
    main()
