"""Bad `EnvRet` / `PolicyResponse` / `BatchedData` payloads through `DataBuffer`: a clear error, nothing stored.

A buffer that is fed corrupted steps among valid ones must end up holding
exactly what a twin buffer fed only the valid steps holds; NaN and inf follow
``nan_guard``. (Random orders of valid operations are in tests/buffer/test_storage_properties.py.)
"""

from __future__ import annotations

import copy
import logging
import pickle
from typing import Any, Callable, Dict, Tuple

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from rlightning.buffer import ReplayBuffer
from rlightning.types import BatchedData, EnvRet, PolicyResponse
from rlightning.utils.config import BufferConfig
from tests.support.buffer_fakes import FakeVecEnv, respond

SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
NUM_ENVS = 2
#: What a rejected step may raise; anything else (AttributeError, IndexError, ...) fails the test.
REJECTED = (ValueError, KeyError, TypeError)

Corruption = Callable[[EnvRet, PolicyResponse], Tuple[Any, Any]]


def _set(obj: Any, name: str, value: Any) -> Any:
    setattr(obj, name, value)
    return obj


def corruptions() -> st.SearchStrategy[Tuple[str, Corruption]]:
    """(label, function) pairs that make a valid (EnvRet, PolicyResponse) pair invalid."""
    shapes = st.sampled_from(
        [(), (NUM_ENVS,), (NUM_ENVS, 4), (NUM_ENVS, 6), (NUM_ENVS + 1, 5), (1, 5), (NUM_ENVS, 5, 1)]
    )
    bad_dtype = st.sampled_from([np.int64, np.float64, np.complex64, np.bool_, object, "U3"])
    junk = st.sampled_from([None, "text", {"a": 1}, [None, None], object()])
    flag_junk = st.sampled_from([None, "yes", [0.5, 0.0], [np.nan, 0.0], [2, 0], np.zeros(NUM_ENVS + 1, bool)])
    reward_junk = st.sampled_from([None, "abc", np.zeros(NUM_ENVS, complex), np.zeros(NUM_ENVS + 1), np.zeros((2, 2))])
    act_junk = st.sampled_from(
        [None, "left", np.zeros(NUM_ENVS, np.float32), np.zeros((NUM_ENVS, 3), np.int64), np.zeros(5, np.int64), 1]
    )
    return st.one_of(
        shapes.map(lambda s: ("obs shape", lambda e, p: (_set(e, "observation", np.zeros(s, np.float32)), p))),
        bad_dtype.map(lambda d: ("obs dtype", lambda e, p: (_set(e, "observation", e.observation.astype(d)), p))),
        junk.map(lambda j: ("obs junk", lambda e, p: (_set(e, "observation", j), p))),
        st.just(("obs huge", lambda e, p: (_set(e, "observation", np.zeros((NUM_ENVS, 2_000_000), np.float32)), p))),
        reward_junk.map(lambda r: ("reward", lambda e, p: (_set(e, "last_reward", r), p))),
        flag_junk.map(lambda f: ("terminated", lambda e, p: (_set(e, "last_terminated", f), p))),
        flag_junk.map(lambda f: ("truncated", lambda e, p: (_set(e, "last_truncated", f), p))),
        act_junk.map(lambda a: ("action", lambda e, p: (e, _set(p, "action", a)))),
        st.just(("no action", lambda e, p: (e, PolicyResponse(p.env_id, value=p.value)))),
        st.just(("extra rows", lambda e, p: (e, _set(p, "log_prob", np.zeros(NUM_ENVS + 3, np.float32))))),
        st.just(("clash", lambda e, p: (e, _set(p, "reward", np.zeros(NUM_ENVS, np.float32))))),
        st.sampled_from([None, 0, "Fake-9"]).map(lambda i: ("env id", lambda e, p: (_set(e, "env_id", i), p))),
        st.sampled_from([None, 3, "Fake-0", {"env_id": "Fake-0"}]).map(
            lambda x: ("not an EnvRet", lambda e, p: (x, p))
        ),
        st.sampled_from([None, 3, "x"]).map(lambda x: ("not a response", lambda e, p: (e, x))),
    )


def make_buffer(**cfg: Any) -> ReplayBuffer:
    env = FakeVecEnv("Fake-0", num_envs=NUM_ENVS, lengths=[2, 3])
    buf = ReplayBuffer(config=BufferConfig(capacity=64, seed=0, **cfg))
    return buf.init([env.meta])


def add(buf: ReplayBuffer, env_ret: Any, resp: Any) -> None:
    ids = [getattr(env_ret, "env_id", "Fake-0")]
    buf.add_batched_transition(BatchedData(ids, [env_ret]), BatchedData(ids, [resp]))


def contents(buf: ReplayBuffer) -> Dict[str, Any]:
    data = buf.get_data()
    return {
        "data": {k: v.clone() for k, v in data.items()} if len(data) else {},
        "size": len(buf),
        "envs": buf.episode_table.get_env_to_storage(),
        "in_progress": buf.stats().get("in_progress"),
    }


def _rows(buf: ReplayBuffer) -> list:
    data = buf.get_data()
    if not len(data):
        return []
    keys = ("obs", "next_obs", "reward", "action")
    flat = torch.cat([data[k].reshape(len(data), -1).double() for k in keys], dim=1)
    return [tuple(r) for r in flat.tolist()]


def same(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    if a.keys() != b.keys() or a["data"].keys() != b["data"].keys():
        return False
    if any(not torch.equal(a["data"][k], b["data"][k]) for k in a["data"]):
        return False
    return all(a[k] == b[k] for k in a if k != "data")


@SETTINGS
@given(
    plan=st.lists(st.one_of(st.none(), corruptions()), min_size=1, max_size=12),
    normalize=st.booleans(),
)
def test_rejected_steps_leave_no_trace(plan, normalize):
    fed, twin = make_buffer(normalize_obs=normalize), make_buffer(normalize_obs=normalize)
    env = FakeVecEnv("Fake-0", num_envs=NUM_ENVS, lengths=[2, 3])
    env_ret = env.reset()
    for item in [None] + plan:  # the first step of an env defines the step layout later steps must match
        resp = respond(env_ret)
        if item is not None:
            label, corrupt = item
            bad_ret, bad_resp = corrupt(copy.deepcopy(env_ret), copy.deepcopy(resp))
            before = contents(fed)
            with pytest.raises(REJECTED):
                add(fed, bad_ret, bad_resp)
            assert same(contents(fed), before), f"a rejected {label} step changed the buffer"
        add(fed, env_ret, resp)
        add(twin, env_ret, resp)
        env_ret = env.step(resp.action)
    fed.truncate_episodes()
    twin.truncate_episodes()
    assert same(contents(fed), contents(twin))


def _poison(env_ret: EnvRet, where: str, row: int, value: float) -> EnvRet:
    env_ret = copy.deepcopy(env_ret)
    if where == "obs":
        env_ret.observation[row, 1] = value
    else:
        env_ret.last_reward[row] = value
    return env_ret


@SETTINGS
@given(
    guard=st.sampled_from(["raise", "drop", "warn"]),
    normalize=st.booleans(),
    poison=st.lists(
        st.tuples(
            st.sampled_from(["obs", "reward"]), st.integers(0, NUM_ENVS - 1), st.sampled_from([np.nan, np.inf, -np.inf])
        ),
        min_size=1,
        max_size=3,
    ),
    at=st.lists(st.integers(1, 9), min_size=1, max_size=3, unique=True),
)
# found by CI: a poisoned reset step at the last step begins no stored transition, so nothing is dropped
@example(guard="drop", normalize=False, poison=[("obs", 0, np.nan)], at=[9])
def test_nan_guard_through_the_data_buffer(guard, normalize, poison, at, caplog):
    caplog.set_level(logging.WARNING, logger="rlightning")
    caplog.clear()  # one caplog serves every example: only this example's records count
    buf, twin = make_buffer(nan_guard=guard, normalize_obs=normalize, normalize_reward=normalize), make_buffer()
    env = FakeVecEnv("Fake-0", num_envs=NUM_ENVS, lengths=[2, 3])
    env_ret = env.reset()
    for t in range(10):
        resp = respond(env_ret)
        sent = env_ret
        if t in at:
            for where, row, value in poison:
                sent = _poison(sent, where, row, value)
            if guard == "raise":
                before = contents(buf)
                with pytest.raises(ValueError, match="non-finite values"):
                    add(buf, sent, resp)
                assert same(contents(buf), before)
                sent = env_ret  # the env's next try is clean
        add(buf, sent, resp)
        add(twin, env_ret, resp)
        env_ret = env.step(resp.action)
    buf.truncate_episodes()
    twin.truncate_episodes()
    data = buf.get_data()
    finite = all(torch.isfinite(data[k]).all() for k in ("obs", "next_obs", "reward")) if len(data) else True
    if guard == "warn":
        assert "storing them anyway (nan_guard='warn')" in caplog.text
        return
    assert finite, "non-finite values were stored"
    if guard == "drop":
        assert "dropping those sub-environments' episodes" in caplog.text
        assert len(buf) <= len(twin)
        if min(at) < 9:  # a poisoned step before the last is part of a transition the twin stores
            assert len(buf) < len(twin)
        # (at the last step only, a poisoned reset step of a sub-env begins no stored transition)
        if not normalize:
            kept, all_rows = _rows(buf), _rows(twin)
            assert all(all_rows.count(r) >= kept.count(r) for r in set(kept)), "drop stored rows the twin has not"
    else:
        assert len(buf) == len(twin)
    if not normalize:
        assert guard == "drop" or same(contents(buf), contents(twin))


def test_nan_does_not_poison_running_statistics():
    """Regression: one NaN observation made every later normalised observation NaN (and rejected)."""
    buf = make_buffer(normalize_obs=True, normalize_reward=True)
    env = FakeVecEnv("Fake-0", num_envs=NUM_ENVS, lengths=[2, 3])
    env_ret = env.reset()
    for t in range(8):
        resp = respond(env_ret)
        if t == 2:
            with pytest.raises(ValueError, match="non-finite"):
                add(buf, _poison(_poison(env_ret, "obs", 0, np.nan), "reward", 1, np.inf), resp)
        add(buf, env_ret, resp)
        env_ret = env.step(resp.action)
    buf.truncate_episodes()
    data = buf.get_data()
    assert len(data) > 0 and torch.isfinite(data["obs"]).all() and torch.isfinite(data["reward"]).all()


@settings(max_examples=50, deadline=None)
@given(ids=st.lists(st.text(max_size=5), max_size=5), data=st.lists(st.integers(), max_size=5))
def test_batched_data_lengths_must_match(ids, data):
    if len(ids) != len(data):
        with pytest.raises(ValueError, match="one id per element"):
            BatchedData(ids, data)
        return
    batch = BatchedData(ids, data)
    assert list(batch.ids()) == ids and list(batch.values()) == data
    assert list(batch + batch) == list(zip(ids, data)) * 2


@settings(max_examples=20, deadline=None)
@given(value=st.one_of(st.none(), st.integers(), st.text(), st.lists(st.integers())))
def test_batched_data_from_dict_needs_a_dict(value):
    with pytest.raises(TypeError, match="expects a dict"):
        BatchedData.from_dict(value)


FIELD_NAMES = st.sampled_from(["observation", "last_reward", "info", "env_id", "ts_env_sent_ns", "value", "x"])


@settings(max_examples=50, deadline=None)
@given(extra=st.dictionaries(FIELD_NAMES, st.integers(), max_size=3))
def test_env_ret_extra_keys_that_clash_are_refused(extra):
    ret = EnvRet("e-0", np.zeros((1, 2), np.float32), _extra=dict(extra))
    clash = set(extra) & (set(EnvRet.fields()) | {"env_id", "ts_env_sent_ns"})
    if clash:
        with pytest.raises(KeyError, match="clashes with a field"):
            ret.to_dict()
    else:
        assert ret.to_dict().keys() == set(EnvRet.fields()) | set(extra)


ARRAYS = st.one_of(
    st.none(),
    st.floats(allow_nan=True),
    st.builds(lambda n, v: np.full(n, v), st.integers(0, 4), st.floats(allow_nan=True, allow_infinity=True)),
)


@settings(max_examples=40, deadline=None)
@given(attrs=st.dictionaries(st.sampled_from(["action", "value", "log_prob", "weight_version"]), ARRAYS, max_size=4))
def test_policy_response_survives_pickling(attrs):
    resp = PolicyResponse("e-1", **attrs)
    back = pickle.loads(pickle.dumps(resp))
    assert back.env_id == "e-1" and set(vars(back)) == set(vars(resp))
    for k, v in attrs.items():
        np.testing.assert_array_equal(getattr(back, k), v)


# ---------------------------------------------------------------------- the record path (add_rollout)


def _record_chunks(steps: int = 12, size: int = 4) -> list:
    """[NUM_ENVS, size] records of a FakeVecEnv built with the one converter."""
    from rlightning.types import step_to_record

    env = FakeVecEnv("Fake-0", num_envs=NUM_ENVS, lengths=[2, 3])
    env_ret, resp = env.reset(), None
    resp = respond(env_ret)
    recs = []
    for _ in range(steps):
        nxt = env.step(resp.action)
        nresp = respond(nxt)
        recs.append(step_to_record(env_ret, resp, nxt, env_meta=env.meta, next_policy_resp=nresp).exclude("env_id"))
        env_ret, resp = nxt, nresp
    out = []
    for i in range(0, steps, size):
        chunk = torch.stack(recs[i : i + size], dim=1)
        chunk.set_non_tensor("env_id", "Fake-0")
        out.append(chunk)
    return out


def _replace(td, key, value):
    td = td.clone()
    td.set(key, value)
    return td


def _drop(td, key):
    td = td.clone()
    del td[key]
    return td


def record_corruptions() -> st.SearchStrategy:
    """(label, function) pairs that make a valid [N, T] record invalid."""
    n, t = NUM_ENVS, 4
    dtypes = st.sampled_from([torch.float64, torch.int64, torch.float16, torch.uint8])
    required = st.sampled_from(["obs", "action", ("next", "obs"), ("next", "reward"), ("next", "done")])
    nonfinite = st.tuples(
        st.sampled_from(["obs", ("next", "obs"), ("next", "reward")]),
        st.integers(0, n - 1),
        st.integers(0, t - 1),
        st.sampled_from([np.nan, np.inf, -np.inf]),
    )

    def poison(args):
        key, row, step, value = args

        def fn(td):
            td = td.clone()
            steps = td["valid"][row].nonzero().squeeze(1).tolist()  # invalid (autoreset) steps are never stored
            step_at = steps[step % len(steps)]
            x = td.get(key)
            if x.ndim == 2:
                x[row, step_at] = value
            else:
                x[row, step_at, 0] = value
            return td

        return (f"non-finite {key}", fn)

    return st.one_of(
        dtypes.map(lambda d: ("reward dtype", lambda td: _replace(td, ("next", "reward"), td["next", "reward"].to(d)))),
        dtypes.map(
            lambda d: (
                "obs dtype",
                lambda td: _replace(_replace(td, "obs", td["obs"].to(d)), ("next", "obs"), td["next", "obs"].to(d)),
            )
        ),
        st.sampled_from([torch.int64, torch.float32]).map(
            lambda d: ("flag dtype", lambda td: _replace(td, ("next", "terminated"), td["next", "terminated"].to(d)))
        ),
        st.integers(1, 6)
        .filter(lambda k: k != 5)
        .map(
            lambda k: (
                "obs shape",
                lambda td: _replace(_replace(td, "obs", torch.zeros(n, t, k)), ("next", "obs"), torch.zeros(n, t, k)),
            )
        ),
        st.just(("reward shape", lambda td: _replace(td, ("next", "reward"), torch.zeros(n, t, 2)))),
        st.just(("next obs shape", lambda td: _replace(td, ("next", "obs"), torch.zeros(n, t, 3)))),
        required.map(lambda k: (f"missing {k}", lambda td: _drop(td, k))),
        st.just(("done flags", lambda td: _replace(td, ("next", "done"), ~td["next", "done"]))),
        st.just(("no env id", lambda td: td.exclude("env_id"))),
        st.just(("rows", lambda td: _with_env(torch.cat([td.exclude("env_id"), td.exclude("env_id")[:1]]), "Fake-0"))),
        st.just(("batch dims", lambda td: _with_env(td.exclude("env_id").unsqueeze(-1), "Fake-0"))),
        st.sampled_from([None, "text", {"obs": 1}, 3]).map(lambda x: ("not a record", lambda td: x)),
        nonfinite.map(poison),
    )


def _with_env(td, env_id):
    td.set_non_tensor("env_id", env_id)
    return td


@SETTINGS
@given(plan=st.lists(st.one_of(st.none(), record_corruptions()), min_size=1, max_size=3))
def test_rejected_records_leave_no_trace(plan):
    fed, twin = make_buffer(), make_buffer()
    chunks = _record_chunks(12, 4)
    for chunk, item in zip(chunks, plan + [None] * len(chunks)):
        if item is not None:
            label, corrupt = item
            before = contents(fed)
            with pytest.raises(REJECTED):
                fed.add_rollout(corrupt(chunk))
            assert same(contents(fed), before), f"a rejected record ({label}) changed the buffer"
        fed.add_rollout(chunk)
        twin.add_rollout(chunk)
    fed.truncate_episodes()
    twin.truncate_episodes()
    assert same(contents(fed), contents(twin))
