"""A2C through the engine (slow): cartpole_a2c reaches a mean training return >= 475 (last 20 episodes)
within its iteration budget, and its deterministic evaluation agrees."""

import pytest
import torch

from rlightning.utils.config import apply_overrides, load_preset


@pytest.mark.slow
def test_cartpole_a2c_solves(tmp_path, build):
    torch.set_num_threads(1)
    cfg = apply_overrides(load_preset("cartpole_a2c"), ["log.progress=false", f"log.run_dir={tmp_path}"])
    e = build(cfg).engine
    e.run()  # stops at train.target_return=475 or after train.iterations
    assert e.last_metrics["episode_return_mean"] >= 475, e.last_metrics
    assert e.env_steps <= cfg.train.iterations * cfg.train.rollout_steps * cfg.env.num_envs
    assert e.evaluate(10)["return_mean"] >= 450
