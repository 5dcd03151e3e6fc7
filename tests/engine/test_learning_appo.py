"""APPO through the asyncrl engine (slow): actors on stale weights, V-trace on the learner, CartPole-v1 to a
mean training return >= 195 (last 20 episodes) within 60k env steps.

The preset's 4 epochs x 4 minibatches are kept: with 2 x 2 (this test's earlier setting) seeds 1-6 needed
45k-61k env steps, and one CI run stopped at 60k with a mean of 158. With 4 x 4, seeds 1-16 reached 195 at
20k-42k env steps (2-3 s each on 2 cores, also beside two busy processes). The full preset's target, 475,
is reached at about 50k-95k env steps (see the preset).
"""

import pytest
import torch

from rlightning.utils.config import apply_overrides, load_preset
from tests.support.configs import LOCAL


@pytest.mark.slow
def test_cartpole_appo_learns_on_stale_weights(tmp_path, build):
    torch.set_num_threads(1)
    cfg = apply_overrides(
        load_preset("cartpole_appo"),
        [
            "train.target_return=195",
            "train.total_env_steps=60000",
            "log.progress=false",
            f"log.run_dir={tmp_path}",
            *LOCAL,
        ],
    )
    e = build(cfg).engine
    history = e.run()  # stops at 195 or at 60k env steps
    assert e.last_metrics["episode_return_mean"] >= 195, (e.env_steps, e.last_metrics)
    assert e.env_steps <= 60000 + 2 * cfg.train.rollout_steps * cfg.env.num_envs * cfg.env.num_workers
    assert max(m.get("batch_policy_lag_max", 0) for m in history) >= 1, "the actors never ran ahead"
