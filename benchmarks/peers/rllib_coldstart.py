"""RLlib cold start: fresh interpreter -> matched PPO config -> ``build_algo()`` -> first ``train()``.

The harness passes its launch time (``--t0``); the figure is the wall-clock
from then to the first training result, imports and Ray start included.
Phases as rlightning's: ``imports_s`` (launch to RLlib's PPO imported),
``ray_start_s`` (``ray.init``), ``build_s`` (``build_algo``: EnvRunners and
learner up) and ``first_step_s`` (``train()``).
"""

from __future__ import annotations

import time

import _common as c

a = c.args()
c.begin("first iteration")
c.set_threads()

import rllib_common as rc  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402, F401  (imported here to time the imports)

t0 = a.t0 or time.time()
marks = [time.time()]
rc.start_ray()
marks.append(time.time())
algo = rc.ppo_config().build_algo()
marks.append(time.time())
res = algo.train()
marks.append(time.time())
seconds = marks[-1] - t0
phases = dict(zip(("imports_s", "ray_start_s", "build_s", "first_step_s"), c.phase_seconds(t0, marks)))
c.result("first iteration", [seconds], "s", iteration_metrics_keys=len(res), **phases)
algo.stop()
