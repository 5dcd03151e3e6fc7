"""``env.max_restarts`` limits consecutive failures; ``env.max_total_restarts`` the run's total (issue 33)."""

from __future__ import annotations

import pytest

from rlightning.env import EnvWorkerError
from tests.support.configs import small_ppo
from tests.support.env_flaky import count_lines

FLAKY = "tests.support.env_flaky:Flaky-v0"


@pytest.mark.parametrize("layout", ["cluster.inference=env_workers", "cluster.inference=eval_workers"])
def test_a_worker_that_steps_cleanly_after_a_restart_is_forgiven(tmp_path, build, layout):
    cfg = small_ppo(tmp_path, False, f"env.name={FLAKY}", "env.max_restarts=3", "train.target_return=null", layout)
    log = tmp_path / "raises.log"
    cfg.env.env_kwargs = {"episode_length": 5, "fail_every": 7, "log_path": str(log)}
    engine = build(cfg).engine
    history = engine.run(iterations=5)
    raised = count_lines(log, "step")
    assert len(history) == 5 and engine.iteration == 5
    assert raised >= 2 * 5  # each worker raised more often than max_restarts allows in a row
    assert history[-1]["env_errors"] == raised == history[-1]["env_restarts"]
    assert history[-1]["episodes"] > 0


def test_failures_in_a_row_past_max_restarts_stop_the_run(tmp_path, build):
    cfg = small_ppo(tmp_path, False, f"env.name={FLAKY}", "env.max_restarts=3", "cluster.inference=eval_workers")
    cfg.env.env_kwargs = {"fail_every": 1, "log_path": str(tmp_path / "raises.log")}  # every step call raises
    engine = build(cfg).engine
    with pytest.raises(
        EnvWorkerError,
        match=r"env worker tests\.support\.env_flaky\.Flaky-v0-0 raised RuntimeError in step: .*already recreated 3 "
        r"time\(s\): max_restarts=3 reached \(3 restart\(s\) in a row without a clean step between",
    ):
        engine.step()
