"""Tests of rlightning/env/utils/episodes.py: running returns and lengths under NEXT_STEP autoreset."""

import numpy as np

from rlightning.env.utils.episodes import EpisodeTracker, done_mask, episode_report
from rlightning.types import EnvRet, MultiAgentEnvRet


def test_tracker_counts_until_done_then_restarts_after_the_reset_step():
    tr = EpisodeTracker(2)
    ret0, len0 = tr.reset()
    assert ret0.tolist() == [0.0, 0.0] and len0.tolist() == [0, 0]
    r, n = tr.update(np.array([1.0, 2.0], np.float32), np.array([False, False]))
    assert r.tolist() == [1.0, 2.0] and n.tolist() == [1, 1]
    r, n = tr.update(np.array([1.0, 2.0], np.float32), np.array([True, False]))
    assert r.tolist() == [2.0, 4.0] and n.tolist() == [2, 2]  # row 0 done: its final values
    # NEXT_STEP: row 0 now returns its reset observation with reward 0.
    r, n = tr.update(np.array([0.0, 2.0], np.float32), np.array([False, False]))
    assert r.tolist() == [0.0, 6.0] and n.tolist() == [0, 3]
    r, n = tr.update(np.array([5.0, 2.0], np.float32), np.array([False, True]))
    assert r.tolist() == [5.0, 8.0] and n.tolist() == [1, 4]
    assert tr.summary() == {"env_steps": 8, "episodes": 2}


def test_returned_arrays_are_not_written_afterwards():
    tr = EpisodeTracker(1)
    tr.reset()
    r1, n1 = tr.update(np.array([1.0]), np.array([True]))
    tr.update(np.array([0.0]), np.array([False]))
    tr.update(np.array([3.0]), np.array([False]))
    assert r1.tolist() == [1.0] and n1.tolist() == [1]


def test_done_mask_for_arrays_and_agent_dicts():
    assert done_mask(np.array([True, False]), np.array([False, False])).tolist() == [True, False]
    term = {"a": np.array([True, False]), "b": np.array([True, True])}
    trunc = {"a": np.array([False, False]), "b": np.array([False, False])}
    assert done_mask(term, trunc).tolist() == [True, False]


def test_episode_report_reads_the_done_rows():
    ret = EnvRet(
        env_id="e-0",
        observation=np.zeros((3, 1)),
        last_reward=np.zeros(3, np.float32),
        last_terminated=np.array([False, True, False]),
        last_truncated=np.array([False, False, True]),
        info={"episode_return": np.array([1.0, 2.0, 3.0]), "episode_length": np.array([4, 5, 6])},
    )
    assert episode_report(ret) == ([2.0, 3.0], [5, 6])
    ret.last_terminated[:] = False
    ret.last_truncated[:] = False
    assert episode_report(ret) == ([], [])


def test_episode_report_for_multi_agent():
    ret = MultiAgentEnvRet(
        env_id="m-0",
        observation={},
        last_reward={},
        last_terminated={"a": np.array([True]), "b": np.array([True])},
        last_truncated={"a": np.array([False]), "b": np.array([False])},
        info={"episode_return": np.array([7.0]), "episode_length": np.array([3])},
    )
    assert episode_report(ret) == ([7.0], [3])
