"""RLlib cold start: fresh interpreter -> matched PPO config -> ``build_algo()`` -> first ``train()``.

The harness passes its launch time (``--t0``); the figure is the wall-clock
from then to the first training result, imports and Ray start included.
"""

from __future__ import annotations

import time

import _common as c

a = c.args()
c.begin("first iteration")
c.set_threads()

import rllib_common as rc  # noqa: E402

rc.start_ray()
algo = rc.ppo_config().build_algo()
res = algo.train()
seconds = time.time() - (a.t0 or time.time())
c.result("first iteration", [seconds], "s", iteration_metrics_keys=len(res))
algo.stop()
