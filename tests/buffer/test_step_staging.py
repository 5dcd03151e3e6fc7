"""Per-step adds staged in numpy (`StepStaging`): what is stored, counted and truncated is what the chunk path gives."""

import numpy as np
import pytest
import torch

import rlightning.buffer.utils.step_staging as staging
from rlightning.buffer.utils import Storage
from rlightning.buffer.utils.step_staging import STAGE_STEPS, StepStaging
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from tests.support.buffer_fakes import FakeVecEnv, check_transitions, reward_for, rollout


def _storage(env, **kwargs):
    return Storage(2000, "circular", "transition", [env.meta], "cpu", seed=0, **kwargs)


def _recent(st):
    return [(e["env_id"], e["return"], e["length"]) for e in st.stats()["recent_episodes"]]


def _same(a, b):
    da, db = a.get_data(), b.get_data()
    assert sorted(da.keys()) == sorted(db.keys())
    for k in da.keys():
        assert torch.equal(da[k], db[k]), k
    for key in ("episodes", "in_progress", "transitions_written"):
        assert a.stats()[key] == b.stats()[key], key
    assert _recent(a) == _recent(b)


@pytest.mark.parametrize("num_envs, lengths", [(1, [9]), (3, [2, 5, 4]), (3, [6, 6, 6]), (4, [70, 3, 90, 5])])
@pytest.mark.parametrize("gae", [False, True])
def test_numpy_planned_flushes_store_what_the_chunk_path_stores(monkeypatch, num_envs, lengths, gae):
    kwargs = {"postprocess_fn": make_gae_postprocess_fn(0.9, 0.8)} if gae else {}
    env_a, env_b = (FakeVecEnv(num_envs=num_envs, lengths=lengths, truncate_rows=[0]) for _ in range(2))
    fast, chunked = _storage(env_a, **kwargs), _storage(env_b, **kwargs)
    planned = []
    real = StepStaging.plan_closed

    def spy(self, t, state):
        plan = real(self, t, state)
        planned.append(plan is not None)
        return plan

    monkeypatch.setattr(StepStaging, "plan_closed", spy)
    last_a = rollout(fast, env_a, 80)
    monkeypatch.setattr(StepStaging, "plan_closed", lambda self, t, state: None)
    last_b = rollout(chunked, env_b, 80)
    assert any(planned)  # the numpy plan was used
    _same(fast, chunked)
    assert check_transitions(fast.get_data(), lengths, [0]) == 0
    fast.truncate_episodes([last_a])
    chunked.truncate_episodes([last_b])
    _same(fast, chunked)


def test_staged_steps_are_counted_and_truncated():
    env = FakeVecEnv(num_envs=2, lengths=[50, 60])
    st = _storage(env)
    rollout(st, env, 11)  # 10 steps paired, none closes an episode
    assert st.writer.staged[env.env_id].pending == 10
    assert len(st) == 0 and st.stats()["in_progress"] == 2 * 10 + 2  # the staged steps and the newest one
    st.truncate_episodes([env.env_id])
    assert len(st) == 20 and st.writer.staged[env.env_id].pending == 0
    assert check_transitions(st.get_data(), env.lengths) == 2  # two episodes truncated by hand


def test_a_long_episode_grows_the_staging_and_is_stored_whole():
    env = FakeVecEnv(num_envs=1, lengths=[5 * STAGE_STEPS])
    st = _storage(env)
    rollout(st, env, 5 * STAGE_STEPS + 2)
    assert st.writer.staged[env.env_id].cap > STAGE_STEPS
    assert len(st) == 5 * STAGE_STEPS and check_transitions(st.get_data(), env.lengths) == 0


def test_a_full_staging_over_its_byte_bound_is_handed_to_the_open_episodes(monkeypatch):
    monkeypatch.setattr(staging, "STAGE_BYTES", 1)
    env_a, env_b = FakeVecEnv(num_envs=2, lengths=[150, 170]), FakeVecEnv(num_envs=2, lengths=[150, 170])
    small, ref = _storage(env_a), _storage(env_b)
    rollout(small, env_a, 400)
    monkeypatch.undo()
    rollout(ref, env_b, 400)
    assert small.writer.staged[env_a.env_id].cap == STAGE_STEPS  # never grew
    _same(small, ref)
    assert check_transitions(small.get_data(), env_a.lengths) == 0


def test_episode_stats_without_auto_truncation_come_from_the_staging():
    env = FakeVecEnv(num_envs=2, lengths=[3, 4])
    st = _storage(env, auto_truncate_episode=False)
    rollout(st, env, 30)
    assert len(st) == 0  # nothing closes: episodes end only by truncation
    for row, length in enumerate(env.lengths):
        mine = [(r, n) for env_id, r, n in _recent(st) if env_id == f"{env.env_id}/{row}"]
        want = sum(reward_for(row, s) for s in range(1, length + 1))
        assert len(mine) >= 5 and all(n == length and np.isclose(r, want) for r, n in mine)


def test_a_refused_close_leaves_the_staged_episode_whole():
    from rlightning.buffer.utils import StorageFullError
    from tests.support.buffer_fakes import respond

    env = FakeVecEnv(num_envs=1, lengths=[4])
    st = Storage(5, "standard", "transition", [env.meta], "cpu", seed=0)
    env_ret = rollout(st, env, 9)  # the first episode stored, the second one's last step is next
    assert len(st) == 4 and st.stats()["in_progress"] == 4
    resp = respond(env_ret)
    with pytest.raises(StorageFullError, match=r"capacity 5 transitions, size 4, env 'Fake-0' step needs 4 more"):
        st.add_transition(env_ret, resp)
    assert len(st) == 4 and st.stats()["in_progress"] == 4  # nothing lost, nothing stored
    st.clear()
    st.add_transition(env_ret, resp)  # the same step again, with room
    assert len(st) == 4 and check_transitions(st.get_data(), env.lengths) == 0
    assert st.get_data()["obs"][:, 1].tolist() == [1.0] * 4  # the second episode, whole
