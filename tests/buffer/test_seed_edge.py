"""The seed API's edge: single unbatched envs, any-callable preprocessors, wrong kinds of payload, read-only views."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.buffer import ReplayBuffer
from rlightning.buffer.utils import BufferView, Storage
from rlightning.buffer.utils.utils import make_gae_postprocess_fn
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.config import BufferConfig

BOX = gym.spaces.Box(-10, 10, (4,), np.float32)


def _meta(num_envs):
    return EnvMeta("single", gym.spaces.Discrete(2), BOX, num_envs)


def _single_steps(steps, length=3):
    """A single unbatched env: observations of the space's own shape, scalar rewards, bool flags."""
    t = 0
    done = False
    out = []
    for k in range(steps):
        obs = np.full(4, float(k), np.float32)
        reward = 0.0 if k == 0 or done else 1.0
        flag = (not done) and k > 0 and k % (length + 1) == length
        out.append(EnvRet("single", obs, reward, bool(flag), False))
        done = flag
        t += 1
    return out


@pytest.mark.parametrize("num_envs", [None, 1])
def test_single_unbatched_env_scalar_action_through_storage_and_buffer(num_envs):
    st = Storage(100, env_meta_list=[_meta(num_envs)], postprocess_fn=make_gae_postprocess_fn(0.9, 0.9))
    for ret in _single_steps(10):
        st.add_transition(ret, PolicyResponse("single", action=1, value=0.5, log_prob=-0.1))
    data = st.get_data()
    assert len(data) == 6 and data["obs"].shape == (6, 4) and data["action"].shape == (6,)
    assert data["done"].sum() == 2 and "advantage" in data.keys()
    buf = ReplayBuffer(config=BufferConfig(capacity=100, seed=0))
    buf.init([_meta(num_envs)])
    for ret in _single_steps(10):
        buf.add_transition(ret, PolicyResponse("single", action=np.int64(0)))
    assert len(buf.get_data()) == 6
    bare = Storage(100)  # no metadata: a 0-d observation is one env too
    for k in range(5):
        bare.add_data_async(EnvRet("other", np.float32(k), 1.0, k == 3, False))
        bare.add_data_async(PolicyResponse("other", action=0))
    assert len(bare) == 3 and bare.get_data()["obs"].tolist() == [0.0, 1.0, 2.0]


def test_single_env_episode_without_env_dim():
    st = Storage(100)
    st.add_episode({"obs": np.zeros((4, 3), np.float32), "action": np.zeros(3, np.int64), "reward": np.ones(3)})
    assert len(st) == 3 and st.get_data()["obs"].shape == (3, 3)


@pytest.mark.parametrize("fn", [np.asarray, lambda x: x * 2, None])
def test_preprocessors_may_be_any_callable(fn):
    st = Storage(100, env_meta_list=[_meta(None)], obs_preprocessor=fn, reward_preprocessor=fn)
    for ret in _single_steps(6):
        st.add_transition(ret, PolicyResponse("single", action=1))
    assert len(st) == 3
    scale = 2.0 if fn is not None and fn is not np.asarray else 1.0
    assert st.get_data()["reward"].tolist() == [scale] * 3
    with pytest.raises(TypeError, match=r"obs_preprocessor must be a callable on a batch \(or None\), got int"):
        Storage(10, obs_preprocessor=3)


@pytest.mark.parametrize(
    "env_ret, match",
    [
        ("text", r"add_transition env_ret must be an EnvRet, got str"),
        (None, r"add_transition env_ret must be an EnvRet, got NoneType"),
        (EnvRet("single", {"a": np.zeros(4, np.float32)}), r"observation must be an array of numbers"),
        (EnvRet("single", np.array([object()] * 4)), r"observation must hold real numbers or booleans, got dtype"),
        (EnvRet("single", None), r"observation must be an array of numbers"),
    ],
)
def test_wrong_kinds_raise_type_errors_naming_the_argument_and_store_nothing(env_ret, match):
    st = Storage(100, env_meta_list=[_meta(None)])
    good = _single_steps(3)
    for ret in good:
        st.add_transition(ret, PolicyResponse("single", action=1))
    before = st.stats()["in_progress"]
    with pytest.raises(TypeError, match=match):
        st.add_transition(env_ret, PolicyResponse("single", action=1))
    assert st.stats()["in_progress"] == before
    buf = ReplayBuffer(config=BufferConfig(capacity=100, seed=0))
    buf.init([_meta(None)])
    with pytest.raises(TypeError, match=match):
        buf.add_transition(env_ret, PolicyResponse("single", action=1))
    for bad_resp in ("left", None, {"action": 1}):
        with pytest.raises(TypeError, match=r"policy_resp must be a PolicyResponse"):
            st.add_transition(good[0], bad_resp)
    with pytest.raises(TypeError, match=r"add_data_async"):
        st.add_data_async("text")
    with pytest.raises(TypeError, match=r"add_data_async"):
        buf.add_data_async(None)


def test_object_dtype_action_is_a_type_error():
    st = Storage(100, env_meta_list=[_meta(None)])
    ret = _single_steps(1)[0]
    with pytest.raises((TypeError, KeyError), match=r"action"):
        st.add_transition(ret, PolicyResponse("single", action=np.array([object()])))


def test_buffer_view_is_read_only_through_rows_and_slices():
    src = TensorDict({"a": torch.arange(5), "obs": torch.ones(5, 2)}, [5])
    view = BufferView(src)
    view[0:3]["a"].zero_()
    view[1]["obs"].zero_()
    view["a"].zero_()
    for batch in view.iter_batches(2):
        batch["a"].zero_()
    assert src["a"].tolist() == [0, 1, 2, 3, 4] and (src["obs"] == 1).all()
    with pytest.raises(TypeError, match=r"read-only"):
        view["a"] = torch.zeros(5)


@pytest.mark.parametrize("num_envs", [None, 3])
def test_long_episodes_through_per_step_adds_keep_every_step(num_envs):
    """Episodes longer than the open-episode tail's first allocations (16, 32 steps) come out whole and in order."""
    st = Storage(1000, env_meta_list=[EnvMeta("long", gym.spaces.Discrete(2), BOX, num_envs)])
    n = num_envs or 1
    lengths = [5, 71, 40, 130]  # sub-env 0's episodes; the others end one step later each
    ends = np.cumsum(lengths)
    for k in range(int(ends[-1]) + n + 1):
        done = np.array([k - j in ends for j in range(n)])
        obs = np.stack([np.full(4, 1000 * j + k, np.float32) for j in range(n)])
        ret = EnvRet("long", obs, np.ones(n, np.float32), done, np.zeros(n, bool))
        if num_envs is None:
            ret = EnvRet("long", obs[0], 1.0, bool(done[0]), False)
        st.add_transition(ret, PolicyResponse("long", action=np.zeros(n, np.int64) if num_envs else 0))
    data = st.get_data()
    # sub-env j's transitions: every step before its last end, but the reset steps (an end's EnvRet starts none)
    expected = [[k for k in range(int(ends[-1]) + j) if k - j not in ends] for j in range(n)]
    assert len(data) == sum(map(len, expected))
    for j in range(n):
        mine = data["obs"][:, 0][(data["obs"][:, 0] // 1000) == j] - 1000 * j
        assert mine.tolist() == expected[j]  # whole, in order


@pytest.mark.parametrize("num_envs", [1, 5])
@pytest.mark.parametrize("close_on_done", [True, False])
def test_waiting_step_columns_store_what_a_chunk_per_step_stores(monkeypatch, num_envs, close_on_done):
    """Per-step columns wait (``STAGE_STEPS``) until a step ends an episode: after every add, truncation and
    refused step the storage holds what it holds when each step goes in as its own chunk (``STAGE_STEPS = 1``),
    with NaN drops, values, standard-mode refusals and the caller's arrays written over between steps."""
    from rlightning.buffer.utils import StorageFullError, storage_writer

    def run(stage):
        monkeypatch.setattr(storage_writer, "STAGE_STEPS", stage)
        rng = np.random.default_rng(1)
        st = Storage(
            150 * num_envs,
            "standard",
            "transition",
            [],
            "cpu",
            seed=0,
            nan_guard="drop",
            auto_truncate_episode=close_on_done,
        )
        obs = np.zeros((num_envs, 3), np.float32)  # one array, written over each step (a caller's reused buffer)
        seen, refused = [], 0
        for k in range(400):
            obs[:] = rng.normal(size=(num_envs, 3))
            if rng.random() < 0.02:
                obs[rng.integers(num_envs), 0] = np.nan
            done = rng.random(num_envs) < 0.03
            extras = {"value": rng.normal(size=num_envs).astype(np.float32)}
            ret = EnvRet("w-0", obs, np.full(num_envs, 0.5, np.float32), done, np.zeros(num_envs, bool))
            try:
                st.add_transition(ret, PolicyResponse("w-0", action=np.full(num_envs, k % 2), **extras))
            except StorageFullError:
                refused += 1
                st.clear()
            if k % 97 == 96:
                try:
                    st.truncate_episodes(["w-0"])
                except StorageFullError:
                    refused += 1
                    st.clear()
            seen.append((len(st), st.stats()["in_progress"] if k % 50 == 0 else None))
        data = st.get_data()
        return seen, {key: data[key].clone() for key in data.keys()}, refused, list(st.writer.recent)

    staged, one = run(storage_writer.STAGE_STEPS), run(1)
    assert staged[0] == one[0]
    assert staged[1].keys() == one[1].keys() and staged[1]
    for key in one[1]:
        assert torch.equal(staged[1][key].nan_to_num(), one[1][key].nan_to_num()), key
    assert staged[2] == one[2] and (staged[2] > 0 or not close_on_done)  # refusals at the same steps
    assert [(e["return"], e["length"]) for e in staged[3]] == [(e["return"], e["length"]) for e in one[3]]
