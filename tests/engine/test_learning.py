"""It learns: the packaged presets reach their target returns within a fixed step budget."""

import pytest

from rlightning.utils.config import apply_overrides, load_preset


@pytest.mark.slow
@pytest.mark.ray
def test_cartpole_ppo_solves_on_ray_workers(tmp_path, build, ray_runtime, remote_flags):
    cfg = apply_overrides(
        load_preset("cartpole_ppo"),
        ["log.progress=false", f"log.run_dir={tmp_path}", "env.num_cpus=0.5", "cluster.remote_env=true"],
    )
    e = build(cfg).engine
    assert e.env_group.stats()["remote"] is True
    e.run()  # stops at train.target_return=475 or after train.iterations
    assert e.last_metrics["episode_return_mean"] >= 475, e.last_metrics
    assert e.env_steps <= cfg.train.iterations * cfg.train.rollout_steps * cfg.env.num_envs * cfg.env.num_workers


@pytest.mark.slow
def test_pendulum_sac_reaches_minus_200(tmp_path, build):
    cfg = apply_overrides(load_preset("pendulum_sac"), ["log.progress=false", f"log.run_dir={tmp_path}"])
    e = build(cfg).engine
    e.run()
    assert e.last_metrics["episode_return_mean"] >= -200, e.last_metrics
