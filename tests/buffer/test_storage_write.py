"""Queued episodes (`rlightning.buffer.utils.storage_write`): every read or other write sees them stored."""

import pytest
import torch

from rlightning.buffer.utils import Storage, StorageFullError
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from tests.support.buffer_fakes import FakeVecEnv, rollout

READS = {
    "get_data": lambda st: st.get_data(),
    "sample": lambda st: st.sample(4),
    "sample_parts": lambda st: st.sample_parts(2, 3),
    "sample_rows": lambda st: st.sample_rows(3),
    "view": lambda st: st.view(),
    "stats": lambda st: st.stats(),
    "num_episodes": lambda st: st.num_episodes(),
    "timing_summary": lambda st: st.timing_summary(),
    "store": lambda st: st.store,
    "clear": lambda st: st.clear(),
    "reset": lambda st: st.reset(),
    "truncate_episodes": lambda st: st.truncate_episodes(["Fake-0"]),
    "extend": lambda st: st.extend(dict(st.sample_rows(1).items())),
    "call_packed": lambda st: st.call_packed("get_data"),
}


def _storage(env, capacity=1000, mode="circular", **kwargs):
    return Storage(capacity, mode, "transition", [env.meta], "cpu", seed=0, **kwargs)


def _queued(**kwargs):
    env = FakeVecEnv(num_envs=3, lengths=[2, 3, 4])
    st = _storage(env, postprocess_fn=make_gae_postprocess_fn(0.9, 0.8), **kwargs)
    rollout(st, env, 14)
    return st, env


def test_later_steps_are_queued_and_size_counts_them():
    st, _ = _queued()
    assert st._pending, "steps after the first stored one should be queued"
    queued = st._pending_n
    assert st.size == st._store.size + queued and len(st) == st.get_size() == st.size
    assert st._pending, "size must not flush"


@pytest.mark.parametrize("read", sorted(READS))
def test_every_read_and_write_flushes_first(read):
    st, _ = _queued()
    twin, _ = _queued()
    twin.flush()
    expected = twin.get_data()
    assert st._pending
    READS[read](st)
    assert not st._pending, f"{read} left episodes queued"
    if read not in ("clear", "reset", "truncate_episodes", "extend"):
        assert (st.get_data() == expected).all()


def test_queued_storage_holds_what_step_by_step_storing_holds():
    st, _ = _queued()
    twin_env = FakeVecEnv(num_envs=3, lengths=[2, 3, 4])
    twin = _storage(twin_env, postprocess_fn=make_gae_postprocess_fn(0.9, 0.8))
    env_ret = None
    for _ in range(14):  # flush after every step: what storing step by step writes
        env_ret = rollout(twin, twin_env, 1, env_ret=env_ret)
        twin.flush()
    a, b = st.get_data(), twin.get_data()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a.keys())
    assert st.stats()["episodes"] == twin.stats()["episodes"]
    assert st.stats()["transitions_written"] == twin.stats()["transitions_written"]
    torch.manual_seed(0)
    s1 = st.sample(5)
    torch.manual_seed(0)
    s2 = twin.sample(5)
    assert all(torch.equal(s1[k], s2[k]) for k in s1.keys())


def test_standard_mode_counts_queued_episodes_before_refusing():
    env = FakeVecEnv(num_envs=3, lengths=[2, 3, 4])
    st = _storage(env, capacity=12, mode="standard")
    env_ret = None
    with pytest.raises(StorageFullError, match="capacity 12 transitions"):
        for _ in range(20):
            env_ret = rollout(st, env, 1, env_ret=env_ret)
    kept = st.size
    assert 0 < kept <= 12 and st.get_data().batch_size[0] == kept
