"""DQN through the engine: priorities written back to the shards (local and Ray storage), the beta cross-check,
and (slow) cartpole_rainbow, on a smaller network, learning CartPole within 15k env steps.

The presets at their published budgets (cartpole_rainbow and cartpole_dqn at 50k env steps, against
rl-baselines3-zoo's 500 +- 0) are measured by benchmarks/learning.py (benchmarks/README.md, "Learning");
a 50k-step run (about 300 s on a 2-core machine) does not fit CI's budget."""

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


#: cartpole_rainbow's algorithm and schedule (double Q, dueling, 3-step returns, prioritized replay, 128 updates
#: of 64 per 256 env steps) on a [64, 64] network, exploring over 5k steps and annealing beta over the 15k.
RAINBOW_15K = [
    "policy.hidden_sizes=[64,64]",
    "policy.epsilon_decay_steps=5000",
    "policy.priority_beta_steps=15000",
    "train.total_env_steps=15000",
]


@pytest.mark.slow
def test_cartpole_rainbow_learns_within_15k_steps(build, tmp_path):
    """After 15k env steps: deterministic evaluation (10 episodes) >= 150, and so is the mean return of the last
    20 training episodes; the untrained policy evaluates below 150.

    A random policy scores 24 (10-episode means 19-30); the untrained greedy policy 16, 132, 9 (seeds 1-3).
    Measured, this configuration, 15k steps, with the policy workers seeded from the run's seed, seeds
    1-3: evaluation 500, 236, 500 (12k: 500, 275, 235; 9k: 496, 407, 500; greedy DQN policies
    oscillate); a fresh-clone CI run of seed 1 evaluated 199.4, the prioritized sampler then drawing from an
    unseeded generator. Since its samplers are seeded from the run's seed (buffer.seed unset) a run repeats
    exactly: seed 1 evaluates 500, its last 20 training episodes 345 on average. Before the eval worker was
    seeded, 12k-step runs swung between 158 and 500. The full budget
    (50k, [256, 256]: 500) is benchmarks/learning.py's cartpole_rainbow row.
    """
    e = build(_config(tmp_path, "cartpole_rainbow", 1, RAINBOW_15K)).engine
    assert e.evaluate(10)["return_mean"] < 150  # the bar is learning, not the untrained policy's luck
    e.run()
    assert 15_000 <= e.env_steps <= 15_000 + e.config.train.rollout_steps
    assert e.last_metrics["episode_return_mean"] >= 150, e.last_metrics
    result = e.evaluate(10)
    assert result["return_mean"] >= 150, result
