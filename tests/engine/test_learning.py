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
def test_cartpole_ppo_fast_solves_in_50k_env_steps(tmp_path, build):
    """cartpole_ppo_fast (local env workers, annealed clip range, fused Adam) reaches a mean return of 475 over
    20 episodes; measured seeds 1-3: 22k, 28k and 27k env steps (about 100 iterations of 256), so 50k leaves
    room for seeds that need more."""
    cfg = apply_overrides(load_preset("cartpole_ppo_fast"), ["log.progress=false", f"log.run_dir={tmp_path}"])
    e = build(cfg).engine
    assert e.env_group.stats()["remote"] is False
    e.run(env_steps=50_000)
    assert e.last_metrics["episode_return_mean"] >= 475, e.last_metrics
    assert e.last_metrics["clip_coef"] < cfg.policy.clip_coef  # annealed


@pytest.mark.slow
def test_pendulum_sac_reaches_minus_300_in_10k_steps(tmp_path, build):
    """pendulum_sac (4 envs, one gradient step per env step): deterministic evaluation (10 episodes) >= -300
    after 10k env steps; the untrained policy scores below it.

    A random policy scores -1208 (10-episode means -1267 to -1129); the untrained actor -1300 to -1410.
    Measured with every worker seeded from the run's seed, seeds 1-3: -158, -164, -149 at 10k steps
    (-518, -172, -732 at 8k; -165, -390, -638 at 6k: 8k is where some seeds still swing). The published
    budget (20k env steps, against rl-baselines3-zoo's -157 +- 89) is benchmarks/learning.py's pendulum_sac row.
    """
    cfg = apply_overrides(
        load_preset("pendulum_sac"),
        ["log.progress=false", f"log.run_dir={tmp_path}", "train.total_env_steps=10000", "train.target_return=null"],
    )
    e = build(cfg).engine
    assert e.evaluate(10)["return_mean"] < -300  # the bar is learning, not the untrained policy's luck
    e.run()
    assert 10_000 <= e.env_steps < 10_000 + cfg.train.rollout_steps * cfg.env.num_envs * cfg.env.num_workers
    result = e.evaluate(10)
    assert result["return_mean"] >= -300, result
