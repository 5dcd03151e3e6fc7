"""Issue 37's fix: `Run.close` returns once its actors' CPUs are free, so a build right after it fits."""

import pytest

from rlightning.notebook import Lab
from rlightning.utils.config import load_preset


@pytest.mark.ray
def test_close_then_build_at_once_on_a_full_cluster(ray_runtime):
    lab = Lab.local()
    try:
        cfg = load_preset("cartpole_ppo")
        total = ray_runtime.cluster_resources()["CPU"]
        cfg.env.num_workers = 1
        cfg.env.num_envs = 2
        cfg.env.num_cpus = total  # the run's env worker takes every CPU of the cluster
        for name in ("first", "second"):
            run = lab.build(cfg, name=name)  # raised "only 0 of the cluster's 8 are free" before the fix
            assert ray_runtime.available_resources().get("CPU", 0.0) < 1e-6
            run.close()
            assert ray_runtime.available_resources().get("CPU", 0.0) == pytest.approx(total)
    finally:
        lab.shutdown()
