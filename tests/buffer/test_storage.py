import logging

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.buffer.utils import Storage, StorageFullError
from rlightning.buffer.utils.utils import gae, make_gae_postprocess_fn
from rlightning.types import EnvRet, PolicyResponse
from tests.support.buffer_fakes import FakeVecEnv, check_transitions, respond, reward_for, rollout


def make_storage(env=None, capacity=1000, mode="circular", unit="transition", **kwargs):
    metas = [env.meta] if env is not None else []
    return Storage(capacity, mode, unit, metas, "cpu", seed=0, **kwargs)


# ---------------------------------------------------------------------- alignment


def test_vectorised_alignment_every_transition_exact():
    env = FakeVecEnv(num_envs=3, lengths=[2, 3, 5], truncate_rows=[1])
    st = make_storage(env)
    rollout(st, env, 13)
    data = st.get_data()
    assert check_transitions(data, env.lengths, [1]) == 0
    # Rows 0, 1, 2 need 3, 4, 6 env steps per episode (final obs step included): after 13 steps
    # (EnvRets 0..12 added) row 0 closed 4 episodes, row 1 three, row 2 two.
    assert len(st) == 4 * 2 + 3 * 3 + 2 * 5
    assert st.stats()["episodes"] == 9
    ends = data[data["done"]]
    assert ends["truncated"].sum() == 3 and ends["terminated"].sum() == 6


def test_final_observation_is_next_obs_and_next_episode_ignores_its_reward():
    env = FakeVecEnv(num_envs=1, lengths=[2])
    st = make_storage(env)
    rollout(st, env, 4)  # obs s=0, s=1, final s=2 (done), reset obs of episode 1
    data = st.get_data()
    assert data["obs"][:, 2].tolist() == [0, 1]
    assert data["next_obs"][-1].tolist()[:3] == [0, 0, 2]
    # The reset step (reward 0) is the first step of the next episode, still in progress.
    assert st.stats()["in_progress"] == 1


def test_manual_truncate_drops_pending_step_and_keeps_bootstrap():
    env = FakeVecEnv(num_envs=2, lengths=[50, 50])
    gae_fn = make_gae_postprocess_fn(0.9, 0.8)
    st = make_storage(env, postprocess_fn=gae_fn)
    last = rollout(st, env, 4)
    assert len(st) == 0
    st.truncate_episodes([env.env_id])
    data = st.get_data()
    assert len(data) == 2 * 3  # steps 0..2 per row; step 3 (reward unknown) dropped
    assert check_transitions(data, env.lengths) == 2
    row0 = data[data["obs"][:, 0] == 0]
    assert row0["truncated"].tolist() == [False, False, True]
    assert row0["next_obs"][-1, 2] == 3  # the dropped step's observation
    # GAE bootstraps from the dropped step's value (3 + 100 * row).
    expected = gae(row0["reward"].numpy(), row0["value"].numpy(), np.zeros(3), 3.0, 0.9, 0.8)
    assert torch.allclose(row0["advantage"], torch.from_numpy(expected))
    assert torch.allclose(row0["return"], row0["advantage"] + row0["value"])
    # The next rollout starts new episodes; its first EnvRet's reward belongs to the dropped step.
    rollout(st, env, 3, env_ret=last)
    st.truncate_episodes([env.env_id])
    new = st.get_data()[6:]
    assert new["obs"][:, 2].tolist() == [4, 5, 4, 5]
    assert check_transitions(new, env.lengths) == 2


def test_truncate_twice_and_truncate_without_data_are_noops():
    env = FakeVecEnv(num_envs=2, lengths=[50, 50])
    st = make_storage(env)
    st.truncate_one_episode(env.env_id)  # known from its EnvMeta, no data yet
    rollout(st, env, 3)
    st.truncate_one_episode(env.reset())  # an object with env_id works too
    size = len(st)
    st.truncate_episodes([env.env_id])
    assert len(st) == size == 4


def test_gae_bootstrap_uses_final_value_only_when_truncated():
    env = FakeVecEnv(num_envs=2, lengths=[3, 3], truncate_rows=[1])
    st = make_storage(env, postprocess_fn=make_gae_postprocess_fn(0.99, 0.95))
    rollout(st, env, 4)
    data = st.get_data()
    for row, boot in ((0, 0.0), (1, 3.0 + 100)):
        ep = data[data["obs"][:, 0] == row]
        term = ep["terminated"].numpy()
        expected = gae(ep["reward"].numpy(), ep["value"].numpy(), term, boot, 0.99, 0.95)
        assert np.allclose(ep["advantage"].numpy(), expected, atol=1e-5)


def test_custom_per_episode_postprocess_fn_gets_each_episode():
    seen = []

    def post(episode, bootstrap_value=None):
        seen.append((episode.batch_size[0], None if bootstrap_value is None else float(bootstrap_value)))
        episode.set("ep_len", torch.full(episode.batch_size, episode.batch_size[0]))
        return episode

    env = FakeVecEnv(num_envs=2, lengths=[2, 3])
    st = make_storage(env, postprocess_fn=post)
    rollout(st, env, 5)
    assert sorted(seen) == [(2, 2.0), (3, 103.0)]
    assert st.get_data()["ep_len"].tolist() == [2, 2, 3, 3, 3]


def test_postprocess_that_changes_length_is_refused():
    env = FakeVecEnv(num_envs=1, lengths=[2])
    st = make_storage(env, postprocess_fn=lambda ep, bootstrap_value=None: ep[:1])
    with pytest.raises(ValueError, match=r"returned 1 transitions for 2; keep the length"):
        rollout(st, env, 3)


def test_many_envs_long_run_record_stays_bounded():
    lengths = list(np.random.default_rng(0).integers(1, 30, size=64))
    env = FakeVecEnv(num_envs=64, lengths=lengths)
    st = make_storage(env, capacity=100_000)
    rollout(st, env, 300)
    check_transitions(st.get_data(), env.lengths)
    # the open steps only, compacted in the open-episode tail, not one column per step of the run
    assert sum(c.t for c in st.writer.open[env.env_id].chunks) <= 4 * (max(lengths) + 1)


def test_auto_truncate_off_keeps_flags_but_not_boundaries():
    env = FakeVecEnv(num_envs=1, lengths=[2])
    st = make_storage(env, auto_truncate_episode=False)
    rollout(st, env, 6)
    assert len(st) == 0
    st.truncate_episodes([env.env_id])
    data = st.get_data()
    # Transition 2 goes from the final observation to the reset one (stored as it came).
    assert len(data) == 5 and data["terminated"].tolist() == [False, True, False, False, True]
    assert data["truncated"].tolist() == [False] * 5 and data["reward"][2] == 0


# ---------------------------------------------------------------------- modes and units


def _episode(t_len, start=0, num_envs=1):
    obs = torch.arange(start, start + t_len + 1, dtype=torch.float32).reshape(-1, 1, 1).repeat(1, num_envs, 1)
    return {
        "obs": obs,
        "action": torch.zeros(t_len, num_envs, dtype=torch.int64),
        "reward": torch.ones(t_len, num_envs),
        "terminated": torch.nn.functional.pad(torch.ones(1, num_envs, dtype=torch.bool), (0, 0, t_len - 1, 0)),
    }


@pytest.mark.parametrize("unit", ["transition", "episode"])
def test_circular_overwrites_oldest(unit):
    st = make_storage(capacity=4 if unit == "episode" else 10, unit=unit)
    for i in range(6):
        st.add_episode(_episode(3, start=100 * i))
    assert len(st) == (4 if unit == "episode" else 10)
    firsts = st.get_data()["obs"][:, 0].tolist()
    if unit == "episode":
        assert firsts == [200, 201, 202, 300, 301, 302, 400, 401, 402, 500, 501, 502]
    else:
        assert firsts == [202, 300, 301, 302, 400, 401, 402, 500, 501, 502]
        assert st.stats()["episodes"] == 3  # the episode starting at 200 is partly overwritten


@pytest.mark.parametrize("unit", ["transition", "episode"])
def test_standard_refuses_when_full_and_keeps_data(unit):
    st = make_storage(capacity=2 if unit == "episode" else 7, mode="standard", unit=unit)
    st.add_episode(_episode(3))
    st.add_episode(_episode(3, start=10))
    before = st.get_data()
    what = "episodes" if unit == "episode" else "transitions"
    with pytest.raises(StorageFullError, match=rf"capacity {st.capacity} {unit}s, size {len(st)}, add_episode needs"):
        st.add_episode(_episode(3, start=20))
    assert (st.get_data() == before).all() and what
    st.clear()
    st.add_episode(_episode(3, start=20))
    assert st.get_data()["obs"][0, 0] == 20


def test_standard_full_step_leaves_everything_and_can_be_retried():
    env = FakeVecEnv(num_envs=2, lengths=[3, 3])
    st = make_storage(env, capacity=4, mode="standard")
    env_ret = env.reset()
    for _ in range(3):
        resp = respond(env_ret)
        st.add_transition(env_ret, resp)
        env_ret = env.step(resp.action)
    resp = respond(env_ret)
    with pytest.raises(StorageFullError, match=r"capacity 4 transitions, size 0, env 'Fake-0' step needs 6 more"):
        st.add_transition(env_ret, resp)
    assert len(st) == 0 and st.stats()["in_progress"] == 6
    with pytest.raises(StorageFullError):  # still no room: the same refusal, nothing changed
        st.add_transition(env_ret, resp)
    assert len(st) == 0 and st.stats()["in_progress"] == 6
    st2 = make_storage(env, capacity=6, mode="standard")
    replay = FakeVecEnv(num_envs=2, lengths=[3, 3])
    ret = replay.reset()
    for _ in range(3):
        r = respond(ret)
        st2.add_transition(ret, r)
        ret = replay.step(r.action)
    st2.add_transition(env_ret, resp)  # the refused step, with room
    check_transitions(st2.get_data(), env.lengths)
    assert len(st2) == 6


def test_transition_wraparound_order_and_long_chunk():
    st = make_storage(capacity=10)
    chunk = lambda lo, hi: {"x": torch.arange(lo, hi)}  # noqa: E731
    st.extend(chunk(0, 7))
    st.extend(chunk(7, 14))
    assert st.get_data()["x"].tolist() == list(range(4, 14))
    st.extend(chunk(100, 125))  # longer than the capacity: the newest 10 stay
    assert st.get_data()["x"].tolist() == list(range(115, 125))
    assert sorted(st.sample(10)["x"].tolist()) != []


def test_episode_unit_samples_whole_episodes_and_slices():
    env = FakeVecEnv(num_envs=3, lengths=[2, 4, 6])
    st = make_storage(env, capacity=50, unit="episode")
    rollout(st, env, 20)
    assert st.size == st.stats()["episodes"] > 0
    batch = st.sample(8)
    assert batch.batch_size[0] == 8 and batch.batch_size[1] == 6
    lengths = batch["mask"].sum(1)
    rows = batch["obs"][:, 0, 0].long()
    assert (lengths == torch.tensor([2, 4, 6])[rows]).all()
    steps = batch["obs"][..., 2]
    for b in range(8):
        n = int(lengths[b])
        assert steps[b, :n].tolist() == list(range(n))
        assert (steps[b, n:] == steps[b, n - 1]).all()  # padding repeats the last step
    st_slices = make_storage(env, capacity=50, unit="episode", slice_len=3)
    rollout(st_slices, FakeVecEnv(num_envs=3, lengths=[2, 4, 6]), 20)
    sl = st_slices.sample(10)
    assert tuple(sl.batch_size) == (10, 3)
    valid = sl["obs"][..., 2]
    for b in range(10):
        n = int(sl["mask"][b].sum())
        assert n == min(3, [2, 4, 6][int(sl["obs"][b, 0, 0])])
        assert (valid[b, 1:n] - valid[b, : n - 1] == 1).all()


def test_episode_unit_grows_its_rows_for_long_episodes():
    st = Storage(3, "circular", "episode", [], "cpu")
    st.store.ring.rows = 8  # start tiny to force growth
    for i in range(5):
        st.add_episode(_episode(7 + i, start=100 * i))
    data = st.get_data()
    assert len(st) == 3 and len(data) == 9 + 10 + 11
    assert data["obs"][:, 0].tolist()[:2] == [200, 201]


# ---------------------------------------------------------------------- add_episode


def test_add_episode_splits_columns_at_done_and_bootstraps():
    t_len, n = 5, 2
    ep = {
        "obs": torch.arange((t_len + 1) * n, dtype=torch.float32).reshape(t_len + 1, n, 1),
        "action": torch.zeros(t_len, n, dtype=torch.int64),
        "reward": torch.ones(t_len, n),
        "value": torch.zeros(t_len, n),
        "terminated": torch.tensor([[0, 0], [1, 0], [0, 0], [0, 0], [0, 0]], dtype=torch.bool),
    }
    st = make_storage(postprocess_fn=make_gae_postprocess_fn(1.0, 1.0))
    st.add_episode(ep, num_envs=n, bootstrap_value=torch.tensor([10.0, 20.0]))
    data = st.get_data()
    assert len(data) == 10 and st.stats()["episodes"] == 3
    col0 = data[:5]
    assert col0["done"].tolist() == [False, True, False, False, True]
    assert col0["return"].tolist() == [2.0, 1.0, 13.0, 12.0, 11.0]  # the second piece bootstraps 10
    assert data[5:]["return"].tolist() == [25.0, 24.0, 23.0, 22.0, 21.0]
    assert ep["terminated"][-1].tolist() == [False, False]  # the caller's tensors are untouched


def test_add_episode_accepts_tensordict_and_single_env_shapes():
    st = make_storage()
    td = TensorDict(
        {"obs": torch.zeros(4, 3), "next_obs": torch.ones(4, 3), "action": torch.zeros(4), "reward": torch.ones(4)},
        batch_size=[4],
    )
    st.add_episode(td)
    data = st.get_data()
    assert len(data) == 4 and data["truncated"].tolist() == [False, False, False, True]


def test_add_episode_stores_the_keys_it_is_given():
    st = make_storage()
    st.add_episode({"obs": torch.arange(8.0).reshape(4, 2)})  # no action, no reward: valid without returns
    data = st.get_data()
    assert sorted(data.keys()) == ["done", "next_obs", "obs", "terminated", "truncated"]
    assert data["next_obs"][:, 0].tolist() == [2.0, 4.0, 6.0] and data["truncated"].tolist() == [False, False, True]
    gae_st = make_storage(postprocess_fn=make_gae_postprocess_fn(0.9, 0.9))
    with pytest.raises(KeyError, match=r"GAE needs a 'reward' key in the episode"):
        gae_st.add_episode({"obs": torch.zeros(4, 2), "value": torch.zeros(3)})
    assert len(gae_st) == 0


def test_add_episode_errors():
    st = make_storage()
    with pytest.raises(KeyError, match=r"add_episode needs key 'obs'"):
        st.add_episode({"action": torch.zeros(3, 1)})
    with pytest.raises(TypeError, match=r"add_episode: key 'obs' must hold real numbers or booleans, got dtype object"):
        st.add_episode({"obs": np.array([None] * 4)})
    with pytest.raises(ValueError, match=r"needs 'next_obs', or T \+ 1 = 4 observations"):
        st.add_episode({"obs": torch.zeros(3, 1), "action": torch.zeros(3, 1), "reward": torch.zeros(3, 1)})
    with pytest.raises(ValueError, match=r"key 'action' has shape \(3, 2\), expected \[T=3, num_envs=1"):
        st.add_episode({"obs": torch.zeros(4, 1), "action": torch.zeros(3, 2), "reward": torch.zeros(3, 1)})
    with pytest.raises(TypeError, match=r"add_episode expects a dict or a TensorDict, got list"):
        st.add_episode([1, 2])
    st.add_episode(_episode(2))
    with pytest.raises(
        ValueError, match=r"transition keys differ from the storage's: missing \[\], unexpected \['v'\]"
    ):
        st.add_episode({**_episode(2), "v": torch.zeros(2, 1)})
    assert len(st) == 2


# ---------------------------------------------------------------------- bad input


def test_observation_shape_and_dtype_errors_name_env_expected_got():
    env = FakeVecEnv(num_envs=2, lengths=[3, 3])
    st = make_storage(env)
    rollout(st, env, 4)
    before = st.get_data()
    bad = env.step()
    bad.observation = bad.observation[:, :3]
    with pytest.raises(
        ValueError, match=r"env 'Fake-0': observation has shape \(2, 3\) and dtype float32, expected shape \(2, 5\)"
    ):
        st.add_transition(bad, respond(env.step()))
    bad.observation = np.zeros((2, 5), np.float64)
    with pytest.raises(ValueError, match=r"dtype float64, expected shape \(2, 5\) and dtype float32"):
        st.add_transition(bad, respond(env.step()))
    assert (st.get_data() == before).all()


def test_first_seen_spec_without_env_meta_and_mismatched_response():
    st = make_storage()
    env = FakeVecEnv(env_id="E", num_envs=2)
    ret = env.reset()
    st.add_transition(ret, respond(ret))
    other = EnvRet(env_id="E", observation=np.zeros((2, 7), np.float32))
    with pytest.raises(ValueError, match=r"env 'E': observation has shape \(2, 7\).*expected shape \(2, 5\)"):
        st.add_transition(other, respond(ret))
    with pytest.raises(ValueError, match=r"PolicyResponse for env 'X' cannot be paired with the EnvRet of env 'E'"):
        st.add_transition(ret, PolicyResponse(env_id="X", action=np.zeros(2)))
    resp = respond(ret)
    resp.action = np.zeros((2, 3))
    with pytest.raises(ValueError, match=r"env 'E': 'action' has shape \(2, 3\), expected \(2, \)"):
        st.add_transition(env.step(), resp)


def test_unknown_env_truncate_raises_key_error():
    env = FakeVecEnv(num_envs=1)
    st = make_storage(env)
    rollout(st, env, 3)
    with pytest.raises(KeyError, match=r"unknown env 'nope': this storage knows \['Fake-0'\]"):
        st.truncate_episodes([env.env_id, "nope"])
    assert st.stats()["in_progress"] == 3  # nothing was truncated


def test_sample_errors():
    st = make_storage()
    with pytest.raises(ValueError, match=r"cannot sample batch_size=4 transitions: the storage holds 0"):
        st.sample(4)
    st.extend({"x": torch.arange(3)})
    with pytest.raises(ValueError, match=r"cannot sample batch_size=4 transitions: the storage holds 3 \(capacity"):
        st.sample(4)
    with pytest.raises(ValueError, match=r"batch_size must be a positive integer, got 0"):
        st.sample(0)
    assert st.sample(3).batch_size[0] == 3


def test_constructor_errors():
    with pytest.raises(ValueError, match=r"capacity must be a positive integer, got 0"):
        Storage(0)
    with pytest.raises(ValueError, match=r"mode must be one of 'circular', 'standard', got 'ring'"):
        Storage(10, "ring")
    with pytest.raises(ValueError, match=r"unit must be one of 'transition', 'episode', got 'step'"):
        Storage(10, "circular", "step")
    with pytest.raises(KeyError, match=r"unknown sampler 'lifo'; valid samplers: uniform, all, batch, prioritized"):
        Storage(10, sampler="lifo")


@pytest.mark.parametrize("guard", ["raise", "drop", "warn"])
def test_nan_guard(guard, caplog):
    env = FakeVecEnv(num_envs=3, lengths=[4, 4, 4])
    st = make_storage(env, nan_guard=guard)
    last = rollout(st, env, 3)
    last.observation[1, 0] = np.nan
    last.last_reward[2] = np.inf
    caplog.set_level(logging.WARNING, logger="rlightning")
    if guard == "raise":
        with pytest.raises(ValueError, match=r"env 'Fake-0': non-finite values in 'obs' at rows \[1\] and 'reward' at"):
            st.add_transition(last, respond(last))
        assert st.stats()["in_progress"] == 9  # the step was refused whole
        return
    st.add_transition(last, respond(last))
    for _ in range(3):  # row 0 finishes its episode
        last = env.step()
        st.add_transition(last, respond(last))
    st.truncate_episodes([env.env_id])
    data = st.get_data()
    rows = data["obs"][:, 0]
    assert "non-finite values in 'obs' at rows [1] and 'reward' at rows [2]" in caplog.text
    if guard == "drop":
        # Row 0: its 4-step episode and one step of the next; rows 1 and 2 lost episode 0.
        assert (rows == 0).sum() == 5 and (data["obs"][rows > 0, 1] == 1).all()
    else:
        assert torch.isnan(data["next_obs"]).any() and torch.isinf(data["reward"]).any()


# ---------------------------------------------------------------------- async pairing


def test_async_halves_in_any_order_match_sync_adds():
    env_a, env_b = FakeVecEnv(num_envs=2, lengths=[2, 3]), FakeVecEnv(num_envs=2, lengths=[2, 3])
    sync, asyn = make_storage(env_a), make_storage(env_a)
    ret_a, ret_b = env_a.reset(), env_b.reset()
    pending = []
    for t in range(12):
        resp_a, resp_b = respond(ret_a), respond(ret_b)
        sync.add_transition(ret_a, resp_a)
        pending += [ret_b, resp_b]
        if t % 3 == 2:  # deliver in batches, responses of some steps before their EnvRets
            order = pending[1::2][:1] + pending[0::2][:1] + pending[2:]
            for item in order:
                asyn.add_data_async(item)
            pending = []
        ret_a, ret_b = env_a.step(resp_a.action), env_b.step(resp_b.action)
    assert (sync.get_data() == asyn.get_data()).all()
    with pytest.raises(TypeError, match=r"add_data_async expects an EnvRet or a PolicyResponse, got dict"):
        asyn.add_data_async({})


def test_async_drops_unanswered_env_rets():
    env = FakeVecEnv(num_envs=1, lengths=[9])
    st = make_storage(env)
    r0 = env.reset()
    r1 = env.step()
    st.add_data_async(r0)
    st.add_data_async(r1)
    st.add_data_async(respond(r1))  # r0 never gets its answer
    assert st.stats()["in_progress"] == 1


# ---------------------------------------------------------------------- stats and timing


def test_stats_timing_and_recent_episodes(caplog):
    env = FakeVecEnv(num_envs=2, lengths=[2, 3])
    st = make_storage(env)
    rollout(st, env, 9)
    stats = st.stats()
    for key in ("size", "capacity", "episodes", "transitions", "recent_episodes", "adds_per_sec", "in_progress"):
        assert key in stats
    recent = stats["recent_episodes"]
    assert {(r["env_id"], r["return"], r["length"]) for r in recent} == {
        ("Fake-0/0", reward_for(0, 1) + reward_for(0, 2), 2),
        ("Fake-0/1", reward_for(1, 1) + reward_for(1, 2) + reward_for(1, 3), 3),
    }
    timing = st.timing_summary()
    assert timing["add_transition"]["calls"] == 9 and timing["write"]["calls"] >= 1
    caplog.set_level(logging.INFO, logger="rlightning")
    st.print_timing_summary(reset=True)
    assert "add_transition" in caplog.text
    assert st.timing_summary() == {}


def test_clear_keeps_episodes_in_progress_reset_forgets_them():
    env = FakeVecEnv(num_envs=1, lengths=[3])
    st = make_storage(env)
    rollout(st, env, 6)
    st.clear()
    assert len(st) == 0 and st.stats()["in_progress"] == 2 and st.stats()["episodes"] == 0
    st.reset()
    assert st.stats()["in_progress"] == 0


def test_call_packed_sends_numpy_both_ways():
    st = make_storage()
    st.extend({"x": torch.arange(5)})
    packed = st.call_packed("sample_parts", 2, 2)
    assert [type(p["data"]["x"]).__name__ for p in packed] == ["ndarray", "ndarray"]
    assert st.call_packed("get_size") == 5
