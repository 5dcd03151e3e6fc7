import numpy as np
import pytest

from rlightning.buffer.utils.episode_tracker import EpisodeTracker


def step(t, n, done=(), value=True):
    s = {
        "obs": np.full((n, 1), t, np.float32),
        "reward": np.full(n, 0.5 * t, np.float32),
        "terminated": np.isin(np.arange(n), done),
        "truncated": np.zeros(n, bool),
        "action": np.full(n, t, np.int64),
    }
    if value:
        s["value"] = np.full(n, 10.0 * t, np.float32) + np.arange(n)
    return s


def test_push_closes_done_rows_with_aligned_rewards_and_bootstrap():
    tr = EpisodeTracker("e", 3)
    for t in range(3):
        assert tr.push(step(t, 3)) is None
    fin = tr.push(step(3, 3, done=[1]))
    assert fin.rows.tolist() == [1] and fin.lengths.tolist() == [3]
    assert fin.data["obs"][:, 0].tolist() == [0, 1, 2]
    assert fin.data["next_obs"][:, 0].tolist() == [1, 2, 3]
    assert fin.data["reward"].tolist() == [0.5, 1.0, 1.5]  # reward of step t arrives with step t + 1
    assert fin.data["terminated"].tolist() == [False, False, True]
    assert fin.bootstrap_value.tolist() == [31.0]  # value of the final observation
    assert tr.start.tolist() == [0, 4, 0]
    assert tr.finishing(np.array([True, True, True])) == (4 + 4, 2)  # row 1 has no step yet


def test_truncate_drops_last_step_and_restarts_every_row():
    tr = EpisodeTracker("e", 2)
    for t in range(4):
        tr.push(step(t, 2))
    assert tr.truncating() == (6, 2)
    fin = tr.truncate()
    assert fin.lengths.tolist() == [3, 3]
    assert fin.data["truncated"].tolist() == [False, False, True] * 2
    assert fin.bootstrap_value.tolist() == [30.0, 31.0]
    assert tr.truncate() is None and tr.pending_transitions == 0


def test_drop_discards_the_row_and_its_step():
    tr = EpisodeTracker("e", 2)
    tr.push(step(0, 2))
    tr.push(step(1, 2), drop=np.array([True, False]))
    fin = tr.push(step(2, 2, done=[0, 1]))
    assert fin.rows.tolist() == [1]  # row 0 had nothing left to close


def test_record_compacts_and_grows():
    tr = EpisodeTracker("e", 2, initial_steps=4)
    for t in range(40):  # row 0 ends every 3 steps, row 1 never: the record must grow
        fin = tr.push(step(t, 2, done=[0] if t % 3 == 2 else []))
        if fin is not None:
            assert fin.data["obs"][:, 0].tolist() == list(range(t - 2, t)) or fin.lengths[0] <= 2
    assert tr.record["obs"].shape[0] >= 40 - tr.base
    fin = tr.truncate()
    row1 = fin.data["obs"][fin.lengths[0] :, 0] if fin.rows[0] == 0 else fin.data["obs"][: fin.lengths[0], 0]
    assert row1.tolist() == list(range(39))
    tr2 = EpisodeTracker("e", 1, initial_steps=4)
    for t in range(100):
        tr2.push(step(t, 1, done=[0] if t % 2 == 1 else []))
    assert tr2.record["obs"].shape[0] == 4  # short episodes: shifted in place, never grown


def test_env_stats_use_info_or_running_sums():
    tr = EpisodeTracker("e", 2)
    assert tr.update_env_stats(np.zeros(2), np.zeros(2, bool)) == []
    assert tr.update_env_stats(np.array([1.0, 2.0]), np.zeros(2, bool)) == []
    assert tr.update_env_stats(np.array([1.0, 2.0]), np.array([True, False])) == [(0, 2.0, 2)]
    info = {"episode_return": np.array([0.0, 9.0]), "episode_length": np.array([0, 7])}
    assert tr.update_env_stats(np.array([0.0, 1.0]), np.array([False, True]), info) == [(1, 9.0, 7)]


def test_bad_num_envs():
    with pytest.raises(ValueError, match=r"env 'e': num_envs must be at least 1, got 0"):
        EpisodeTracker("e", 0)
