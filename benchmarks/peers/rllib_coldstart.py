"""RLlib cold start: fresh interpreter -> matched PPO config -> ``build_algo()`` -> first ``train()``.

The harness passes its launch time (``--t0``); the figure is the wall-clock
from then to the first training result, imports and Ray start included.
Phases as rlightning's: ``imports_s`` (launch to RLlib's PPO imported),
``ray_start_s`` (``ray.init``), ``build_s`` (``build_algo``: EnvRunners and
learner up) and ``first_step_s`` (``train()``).

``--ppo`` (``benchmarks/run --quick``): the same algorithm (seeded as
rllib_ppo.py's) then trains on as rllib_ppo.py's (``--max-seconds`` cap),
timed from the built algorithm, first iteration included; ``--sampling``
then measures rllib_sampling.py's cases (``--cases``) on the same Ray
runtime, reported as ``sampling:CASE``. One Ray start serves all three items.
"""

from __future__ import annotations

import time

import _common as c


def _more(p) -> None:
    p.add_argument("--ppo", action="store_true", help="then train the same algorithm to the PPO target (or the cap)")
    p.add_argument("--sampling", action="store_true", help="then the sampling cases on the same Ray runtime")


a = c.args(_more)
c.begin("first iteration")
c.set_threads()

import rllib_common as rc  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402, F401  (imported here to time the imports)

t0 = a.t0 or time.time()
marks = [time.time()]
rc.start_ray()
marks.append(time.time())
config = rc.ppo_config()
algo = (config.debugging(seed=1) if a.ppo else config).build_algo()
marks.append(time.time())
built = time.perf_counter()
res = algo.train()
marks.append(time.time())
seconds = marks[-1] - t0
phases = dict(zip(("imports_s", "ray_start_s", "build_s", "first_step_s"), c.phase_seconds(t0, marks)))
c.result("first iteration", [seconds], "s", iteration_metrics_keys=len(res), **phases)
if a.ppo:
    import rllib_ppo  # noqa: E402

    c.begin("solve")
    rllib_ppo.train_to_target(algo, a.max_seconds, built, it=1, res=res)
algo.stop()
if a.sampling:
    import rllib_sampling  # noqa: E402
    from ray.rllib.execution.rollout_ops import synchronous_parallel_sample  # noqa: E402

    for case in a.cases:
        rllib_sampling.measure(case, a, synchronous_parallel_sample, name=f"sampling:{case}")
