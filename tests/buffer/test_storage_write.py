"""The record path (`Storage.add_rollout`) and the writer's two write paths hold exactly what the seed edge holds."""

import logging

import numpy as np
import pytest
import torch

from rlightning.buffer.utils import Storage, StorageFullError
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from rlightning.types import step_to_record
from tests.support.buffer_fakes import FakeVecEnv, check_transitions, respond, rollout


def _storage(env, capacity=1000, mode="circular", unit="transition", **kwargs):
    return Storage(capacity, mode, unit, [env.meta], "cpu", seed=0, **kwargs)


def _records(env, steps):
    """``steps`` [N] records of a FakeVecEnv, built with the one converter (next.value from the next response)."""
    env_ret = env.reset()
    resp = respond(env_ret)
    out = []
    for _ in range(steps):
        nxt = env.step(resp.action)
        nresp = respond(nxt)
        out.append(step_to_record(env_ret, resp, nxt, env_meta=env.meta, next_policy_resp=nresp))
        env_ret, resp = nxt, nresp
    return out


def _chunks(records, size):
    """Stack [N] records along time into [N, T] chunks."""
    out = []
    for i in range(0, len(records), size):
        part = [r.exclude("env_id") for r in records[i : i + size]]
        chunk = torch.stack(part, dim=1)
        chunk.set_non_tensor("env_id", records[i].get_non_tensor("env_id"))
        out.append(chunk)
    return out


def _same(a, b, ordered=True):
    """Same transitions (in the same order, or as sets: one add stores its episodes row by row)."""
    assert sorted(a.keys()) == sorted(b.keys())
    if not ordered:
        a = a[torch.argsort(a["obs"][:, 3] * 100 + a["obs"][:, 0])]
        b = b[torch.argsort(b["obs"][:, 3] * 100 + b["obs"][:, 0])]
    for k in a.keys():
        assert torch.equal(a[k], b[k]), k


@pytest.mark.parametrize("chunk", [1, 3, 7, 40])
@pytest.mark.parametrize("gae", [False, True])
def test_record_chunks_store_what_the_seed_edge_stores(chunk, gae):
    kwargs = {"postprocess_fn": make_gae_postprocess_fn(0.9, 0.8)} if gae else {}
    lengths, steps = [2, 3, 5, 1], 40
    seed = _storage(FakeVecEnv(num_envs=4, lengths=lengths, truncate_rows=[1]), **kwargs)
    rollout(seed, FakeVecEnv(num_envs=4, lengths=lengths, truncate_rows=[1]), steps + 1)
    env = FakeVecEnv(num_envs=4, lengths=lengths, truncate_rows=[1])
    rec = _storage(env, **kwargs)
    for td in _chunks(_records(env, steps), chunk):
        rec.add_rollout(td)
    _same(seed.get_data(), rec.get_data(), ordered=chunk == 1)
    assert check_transitions(rec.get_data(), lengths, [1]) == 0
    assert rec.stats()["episodes"] == seed.stats()["episodes"]
    assert rec.writer.pending_transitions() == seed.writer.pending_transitions()
    seed.truncate_episodes([env.env_id])
    rec.truncate_episodes([env.env_id])
    _same(seed.get_data(), rec.get_data(), ordered=chunk == 1)


def test_one_copy_per_row_for_chunks_two_for_single_steps():
    env = FakeVecEnv(num_envs=8, lengths=[7] * 8)
    st = _storage(env)
    chunks = _chunks(_records(env, 64), 16)
    st.add_rollout(chunks[0])  # the first write allocates (gathered path)
    st.store.ring.run_copy_min_bytes = 0  # write these small rows run by run as pixels would be
    for td in chunks[1:]:
        st.add_rollout(td)
        assert st.writer.copies_per_row == 1  # slice copies straight from the record into the ring
    small = _storage(FakeVecEnv(num_envs=8, lengths=[7] * 8))
    for td in _chunks(_records(FakeVecEnv(num_envs=8, lengths=[7] * 8), 64), 16):
        small.add_rollout(td)
    assert small.writer.rows_by_copies[2] > 0  # small rows spread over records: gather + scatter is faster
    _same(st.get_data(), small.get_data())
    env1 = FakeVecEnv(num_envs=8, lengths=[7] * 8)
    st1 = _storage(env1)
    for td in _records(env1, 64):
        st1.add_rollout(td)
    assert st1.writer.copies_per_row == 2  # episodes spread over [N] records: gathered, then scattered
    _same(st.get_data(), st1.get_data(), ordered=False)


def test_direct_and_gathered_paths_hold_the_same():
    env_a, env_b = FakeVecEnv(num_envs=3, lengths=[2, 3, 4]), FakeVecEnv(num_envs=3, lengths=[2, 3, 4])
    a = _storage(env_a, capacity=20, postprocess_fn=make_gae_postprocess_fn(0.9, 0.8))
    b = _storage(env_b, capacity=20, postprocess_fn=make_gae_postprocess_fn(0.9, 0.8))
    b.writer.direct = False
    rollout(a, env_a, 30)
    rollout(b, env_b, 30)
    _same(a.get_data(), b.get_data())
    assert a.stats()["episodes"] == b.stats()["episodes"]
    assert a.stats()["transitions_written"] == b.stats()["transitions_written"]


def test_invalid_steps_are_never_stored_and_episodes_close_on_done():
    env = FakeVecEnv(num_envs=2, lengths=[2, 3])
    st = _storage(env)
    recs = _records(env, 12)
    (chunk,) = _chunks(recs, 12)
    assert not chunk["valid"].all()
    st.add_rollout(chunk)
    data = st.get_data()
    assert len(data) == int(chunk["valid"].sum()) - st.stats()["in_progress"]
    assert check_transitions(data, env.lengths) == 0
    assert (data["reward"] > 0).all()  # autoreset steps (reward 0) are not there


def test_nan_guard_on_records(caplog):
    caplog.set_level(logging.WARNING, logger="rlightning")
    env = FakeVecEnv(num_envs=2, lengths=[3, 3])
    recs = _records(env, 8)
    bad = _chunks(recs, 8)[0]
    bad["next", "obs"][1, 1, 0] = float("nan")
    st = _storage(FakeVecEnv(num_envs=2, lengths=[3, 3]))
    with pytest.raises(ValueError, match=r"non-finite values in 'next_obs' at rows \[1\]; nothing was stored"):
        st.add_rollout(bad)
    assert len(st) == 0 and st.stats()["in_progress"] == 0
    drop = _storage(FakeVecEnv(num_envs=2, lengths=[3, 3]), nan_guard="drop")
    drop.add_rollout(bad)
    rows = drop.get_data()["obs"][:, 0]
    assert (rows == 0).sum() == 6 and (drop.get_data()["obs"][rows == 1, 1] == 1).all()  # row 1 lost episode 0
    assert "dropping those sub-environments' episodes" in caplog.text


def test_finite_values_whose_sum_overflows_are_stored_and_invalid_steps_are_not_checked():
    env = FakeVecEnv(num_envs=2, lengths=[3, 3])
    (big,) = _chunks(_records(env, 8), 8)
    big["obs"][:, 1, 0] = 3e38  # finite, but the chunk's sum is inf: the finite check looks per value
    big["next", "obs"][:, 0, 0] = 3e38
    st = _storage(FakeVecEnv(num_envs=2, lengths=[3, 3]))
    st.add_rollout(big)
    assert (st.get_data()["obs"][:, 0] == 3e38).sum() == 2
    (skipped,) = _chunks(_records(FakeVecEnv(num_envs=2, lengths=[3, 3]), 8), 8)
    invalid = ~skipped["valid"]
    assert invalid.any()
    skipped["obs"][invalid] = float("nan")  # autoreset steps are never stored: their values are not checked
    other = _storage(FakeVecEnv(num_envs=2, lengths=[3, 3]))
    other.add_rollout(skipped)
    assert len(other) > 0 and torch.isfinite(other.get_data()["obs"]).all()


def test_record_errors_name_the_key_and_store_nothing():
    env = FakeVecEnv(num_envs=2, lengths=[3, 3])
    st = _storage(env)
    (good,) = _chunks(_records(env, 4), 4)
    st.add_rollout(good)
    size = len(st)
    wrong = good.clone()
    wrong["next", "reward"] = wrong["next", "reward"].double()
    with pytest.raises(ValueError, match=r"add_rollout record key 'next.reward' has dtype float64, expected float32"):
        st.add_rollout(wrong)
    with pytest.raises(TypeError, match=r"add_rollout record must be a tensordict.TensorDict"):
        st.add_rollout({"obs": np.zeros(3)})
    with pytest.raises(ValueError, match=r"has 3 rows .*expected num_envs=2"):
        st.add_rollout(torch.cat([good, good[:1]]))
    no_obs = good.exclude("obs")
    with pytest.raises(KeyError, match=r"add_rollout record has no 'obs' key"):
        st.add_rollout(no_obs)
    extra = good.clone()
    extra["junk"] = torch.zeros(2, 4)
    with pytest.raises(ValueError, match=r"keys differ from the stored ones: missing \[\], unexpected \['junk'\]"):
        st.add_rollout(extra)
    with pytest.raises(TypeError, match=r"needs the env worker's id"):
        st.add_rollout(good.exclude("env_id"))
    assert len(st) == size


def test_a_record_is_not_written_to_by_the_storage():
    env = FakeVecEnv(num_envs=2, lengths=[50, 50])
    st = _storage(env)
    (chunk,) = _chunks(_records(env, 5), 5)
    before = chunk.clone()
    st.add_rollout(chunk)
    st.truncate_episodes([env.env_id])  # marks the last stored steps truncated: in the store, not the record
    assert (chunk == before).all()
    assert st.get_data()["truncated"].sum() == 2


def test_add_rollout_standard_full():
    env = FakeVecEnv(num_envs=2, lengths=[3, 3])
    st = _storage(env, capacity=4, mode="standard")
    (chunk,) = _chunks(_records(env, 4), 4)
    with pytest.raises(StorageFullError, match=r"capacity 4 transitions, size 0, env 'Fake-0' record needs 6 more"):
        st.add_rollout(chunk)
    assert len(st) == 0 and st.stats()["in_progress"] == 0
    big = _storage(FakeVecEnv(num_envs=2, lengths=[3, 3]), capacity=6, mode="standard")
    big.add_rollout(chunk)  # the refused record, where there is room
    assert len(big) == 6


def test_data_buffer_routes_records_by_env_id():
    from rlightning.buffer import ReplayBuffer
    from rlightning.utils.config import BufferConfig

    envs = [FakeVecEnv(f"Fake-{i}", num_envs=2, lengths=[3, 4], tag=i) for i in range(3)]
    buf = ReplayBuffer(config=BufferConfig(capacity=500, seed=0))
    buf.init([e.meta for e in envs], num_storages=2, num_train_workers=2)
    chunks = [_chunks(_records(e, 12), 6) for e in envs]
    for step in range(2):
        buf.add_rollouts([c[step] for c in chunks])
    assert buf.episode_table.get_env_to_storage() == {"Fake-0": 0, "Fake-1": 1, "Fake-2": 0}
    data = buf.get_data()
    for tag in range(3):
        assert check_transitions(data[data["obs"][:, 4] == tag], [3, 4]) == 0
    shard0 = set(buf.storages[0].get_data()["obs"][:, 4].long().tolist())
    assert shard0 == {0, 2}
    batches = buf.sample(8)
    assert len(batches) == 2 and all(b.batch_size[0] == 8 for b in batches)
    with pytest.raises(TypeError, match=r"add_rollout record 0 needs the env worker's id"):
        buf.add_rollout(chunks[0][0].exclude("env_id"))
    with pytest.raises(TypeError, match=r"add_rollout record 0 must be a tensordict.TensorDict, got str"):
        buf.add_rollout("text")
    bad = chunks[0][0].clone()
    bad.set_non_tensor("env_id", "Fake-new")
    del bad["next", "done"]
    with pytest.raises(KeyError, match=r"has no 'next.done' key"):
        buf.add_rollout(bad)
    assert "Fake-new" not in buf.episode_table.get_env_to_storage()  # a rejected new env is not kept routed


def test_dict_observation_records_are_stored_with_dotted_keys():
    import gymnasium as gym

    from rlightning.types import EnvMeta, EnvRet, PolicyResponse

    space = gym.spaces.Dict(
        {"pos": gym.spaces.Box(-1, 1, (2,), np.float32), "img": gym.spaces.Box(0, 255, (3, 3), np.uint8)}
    )
    meta = EnvMeta("D-0", gym.spaces.Discrete(2), space, 2)
    st = Storage(100, env_meta_list=[meta])

    def ret(k, done):
        obs = {"pos": np.full((2, 2), k, np.float32), "img": np.full((2, 3, 3), k, np.uint8)}
        return EnvRet("D-0", obs, np.ones(2, np.float32), np.array([done, False]), np.zeros(2, bool))

    rets = [ret(0, False), ret(1, False), ret(2, True), ret(3, False)]
    resp = PolicyResponse("D-0", action=np.zeros(2, np.int64))
    for a, b in zip(rets[:-1], rets[1:]):
        st.add_rollout(step_to_record(a, resp, b, env_meta=meta))
    data = st.get_data()
    assert {"obs.pos", "obs.img", "next_obs.pos", "next_obs.img"} <= set(data.keys())
    assert data["obs.img"].dtype == torch.uint8 and data["obs.pos"][:, 0].tolist() == [0.0, 1.0]
    assert data["next_obs.img"][-1, 0, 0] == 2  # row 0's final observation
