"""DQN through the engine: priorities written back to the shards (local and Ray storage), the beta cross-check,
and (slow) the cartpole_rainbow and cartpole_dqn presets reaching a deterministic return >= 475 within 50k env steps."""

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


@pytest.mark.slow
def test_cartpole_dqn_reaches_475_within_50k_steps(build, tmp_path):
    """rl-baselines3-zoo's DQN settings: a deterministic evaluation (5 episodes, every 12 iterations = 3072 steps)
    reaches >= 475 within 50k steps. Plain DQN's greedy policy is not stable at this budget (it peaks, then
    often falls back), so the final evaluation is not what is asserted here; cartpole_rainbow's is."""
    cfg = _config(tmp_path, "cartpole_dqn", 2, ["train.eval_interval=12", "train.eval_episodes=5"])
    e = build(cfg).engine
    history = e.run()
    assert e.env_steps <= 50_000 + cfg.train.rollout_steps
    best = max(m.get("eval_return_mean", 0.0) for m in history)
    assert best >= 475, [round(m["eval_return_mean"]) for m in history if "eval_return_mean" in m]
