"""Tests of rlightning/env/utils/stats.py: the env group's counters."""

import numpy as np

from rlightning.env.utils.stats import GroupStats
from rlightning.types import EnvRet


def _ret(done, returns, lengths):
    n = len(done)
    return EnvRet(
        env_id="e-0",
        observation=np.zeros((n, 1)),
        last_reward=np.zeros(n, np.float32),
        last_terminated=np.array(done),
        last_truncated=np.zeros(n, bool),
        info={"episode_return": np.array(returns, float), "episode_length": np.array(lengths)},
    )


def test_snapshot_counts_steps_episodes_and_restarts():
    st = GroupStats(["a-0", "a-1"])
    snap = st.snapshot()
    assert snap["env_steps"] == 0 and snap["env_steps_per_s"] == 0.0 and snap["mean_return"] is None
    st.add_steps(4)
    st.add_steps(4)
    st.add_env_rets([_ret([False, True], [1.0, 9.0], [1, 9]), _ret([False, False], [1.0, 1.0], [1, 1])])
    st.add_restart("a-1")
    snap = st.snapshot()
    assert snap["env_steps"] == 8
    assert snap["env_steps_per_s"] > 0
    assert snap["episodes"] == 1 and snap["recent_returns"] == [9.0] and snap["recent_lengths"] == [9]
    assert snap["mean_return"] == 9.0 and snap["mean_length"] == 9.0
    assert snap["restarts"] == {"a-0": 0, "a-1": 1} and snap["total_restarts"] == 1


def test_recent_episodes_are_bounded():
    st = GroupStats(["a-0"], recent=3)
    st.add_episodes([1.0, 2.0, 3.0, 4.0], [1, 2, 3, 4])
    snap = st.snapshot()
    assert snap["episodes"] == 4 and snap["recent_returns"] == [2.0, 3.0, 4.0]
