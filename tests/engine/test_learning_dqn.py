"""DQN through the engine: priorities written back to the shards (local and Ray storage), the beta cross-check,
and (slow) the cartpole_rainbow preset reaching a deterministic return >= 475 within 50k env steps.

Plain DQN with rl-baselines3-zoo's settings (cartpole_dqn, nn.Linear's init as SB3's) is measured by
benchmarks/learning.py (benchmarks/README.md, "Learning"); a second 50k-step learning test would not fit CI's budget."""

from __future__ import annotations

import pytest
import torch

from rlightning.utils.config import ConfigError, apply_overrides, load_preset

SMALL = [
    "log.progress=false",
    "env.num_envs=2",
    "train.rollout_steps=64",
    "train.learning_starts=100",
    "train.batch_size=32",
    "train.updates_per_iteration=2",
    "buffer.sampler=prioritized",
    "buffer.priority_beta=0.4",
    "policy.hidden_sizes=[32]",
]


def _weights_after_training(build, tmp_path, extra):
    cfg = apply_overrides(load_preset("cartpole_rainbow"), [*SMALL, f"log.run_dir={tmp_path}", *extra])
    e = build(cfg).engine
    for _ in range(4):
        e.step()
    assert e.env_steps >= 4 * 64 * 2
    return e.buffer.sample(256)[0]["_weight"]


def test_td_priorities_reach_the_local_shard(build, tmp_path):
    weight = _weights_after_training(build, tmp_path, [])
    # Without write-back every slot keeps the initial (max) priority and every weight is exactly 1.
    assert float(weight.std()) > 0.0 and float(weight.min()) < 1.0


@pytest.mark.ray
def test_td_priorities_reach_a_ray_storage_shard_from_a_ray_train_worker(build, tmp_path, ray_runtime):
    extra = ["cluster.remote_storage=true", "cluster.buffer_each_cpu_num=0.5", "cluster.remote_train=true"]
    weight = _weights_after_training(build, tmp_path, extra)
    assert float(weight.std()) > 0.0 and float(weight.min()) < 1.0


def test_priority_beta_must_match_the_buffer(build, tmp_path):
    cfg = apply_overrides(
        load_preset("cartpole_rainbow"), [*SMALL, f"log.run_dir={tmp_path}", "policy.priority_beta_start=0.5"]
    )
    with pytest.raises(ConfigError, match=r"policy.priority_beta_start=0.5 differs from buffer.priority_beta=0.4"):
        build(cfg)


def _config(tmp_path, preset, seed, extra=()):
    torch.set_num_threads(1)
    return apply_overrides(
        load_preset(preset), ["log.progress=false", f"log.run_dir={tmp_path}", f"seed={seed}", *extra]
    )


@pytest.mark.slow
def test_cartpole_rainbow_solves_within_50k_steps(build, tmp_path):
    """Double + dueling + 3-step + prioritized: deterministic evaluation (10 episodes) >= 475 after 50k steps."""
    e = build(_config(tmp_path, "cartpole_rainbow", 1)).engine
    e.run()  # train.total_env_steps: 50k
    assert e.env_steps <= 50_000 + e.config.train.rollout_steps
    assert e.evaluate(10)["return_mean"] >= 475
