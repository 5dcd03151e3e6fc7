"""Copies of an observation on the record path (issue 15), counted with storage pointers.

Env output -> record, record -> ring, ring -> sampled batch: 3 copies; 4 with Ray env workers (the object
store). On- and off-policy alike: the learner gets a gather of the ring's rows (lending them in place, read-only,
measured within noise of the copy end to end and was removed). The storage copies nothing before the ring
(no record -> flat chunk copy)."""

import numpy as np
import pytest
import torch

from rlightning.buffer.utils import Storage
from rlightning.buffer.utils.open_episodes import HOLD_STEPS
from rlightning.buffer.utils.record_chunks import chunk_from_record
from rlightning.buffer.utils.tensor_store import RowRing
from rlightning.env.utils.record_writer import arrays_to_record


def _records(n, t, count, width, length):
    """``count`` [n, t] records laid out as the env worker's writer lays them out (`arrays_to_record`: ``obs`` and
    ``next.obs`` are views of one [n, t + 1] array). Row r's step k (overall) has obs ``[r, k, ...]``; episodes
    of ``length`` steps; the step after an end is the autoreset step (not valid)."""
    out = []
    for i in range(count):
        steps = np.arange(i * t, i * t + t + 1)
        obs = np.zeros((n, t + 1, width), np.float32)
        obs[:, :, 0] = np.arange(n)[:, None]
        obs[:, :, 1] = steps[None, :]
        k = steps[:-1]
        done = np.broadcast_to((k % (length + 1)) == length - 1, (n, t)).copy()
        valid = np.broadcast_to((k % (length + 1)) != length, (n, t)).copy()
        arrays = {
            "obs": obs,
            "action": np.zeros((n, t), np.int64),
            "log_prob": np.full((n, t), -0.5, np.float32),
            "episode_id": np.zeros((n, t), np.int64),
            "valid": valid,
            "reward": np.ones((n, t), np.float32),
            "terminated": done,
            "truncated": np.zeros((n, t), bool),
            "done": done.copy(),
        }
        out.append(arrays_to_record(arrays, "Copies-0"))
    return out


def _storage_ptr(x: torch.Tensor) -> int:
    return x.untyped_storage().data_ptr()


def test_a_chunk_holds_views_of_the_record_not_copies():
    (td,) = _records(3, 8, 1, 4, 3)
    assert not td["obs"].is_contiguous()  # [:, :T] of the [N, T + 1] observation array
    chunk, *_ = chunk_from_record(td, True)
    leaves = {"obs": td["obs"], "next_obs": td["next", "obs"], "action": td["action"], "reward": td["next", "reward"]}
    for key, leaf in leaves.items():
        assert _storage_ptr(chunk.data[key]) == _storage_ptr(leaf), key
    assert set(chunk.key_strides) == {"obs", "next_obs"} and chunk.key_strides["obs"] == 9
    assert torch.equal(chunk.logical("next_obs"), td["next", "obs"])


@pytest.mark.parametrize("t, width, length", [(8, 4, 7), (HOLD_STEPS, 128, 40)])
def test_the_ring_copies_each_observation_straight_from_the_record(monkeypatch, t, width, length):
    """Episodes inside each record: one copy per row into the ring. Rows of 1 KB whose episodes span records
    (records of `HOLD_STEPS` steps or more are held by reference): long runs are copied once, run by run;
    short runs of a few steps are gathered, then scattered (`RowRing.copy_rows_to`); every copy reads the record."""
    n = 3
    records = _records(n, t, 8, width, length)
    record_storages = {_storage_ptr(td["obs"]) for td in records}
    st = Storage(1000, seed=0)
    rest = list(records)
    while len(st) == 0:  # the first write allocates the ring (gathered)
        st.add_rollout(rest.pop(0))
    calls = []
    real = RowRing.copy_rows_to

    def traced(self, source, idx, dst):
        made = real(self, source, idx, dst)
        calls.append(({k: _storage_ptr(v) for k, v in source.items()}, idx.numel(), made))
        return made

    monkeypatch.setattr(RowRing, "copy_rows_to", traced)
    before = sum(st.writer.rows_by_copies.values())
    for td in rest:
        st.add_rollout(td)
    obs_calls = [(src, rows, made) for src, rows, made in calls if "obs" in src]
    assert obs_calls and all(
        src["obs"] in record_storages and src["next_obs"] in record_storages for src, *_ in obs_calls
    )
    written = sum(st.writer.rows_by_copies.values()) - before
    assert sum(rows for _, rows, _ in obs_calls) == written > 0  # every stored observation came from a record
    once = sum(rows for _, rows, made in obs_calls if made == 1)
    assert once == written if length < t else once >= written // 2
    data = st.get_data()
    assert torch.equal(data["next_obs"][:, 1], data["obs"][:, 1] + 1)  # each step's next observation
    assert torch.equal(data["next_obs"][:, 0], data["obs"][:, 0])  # of the same sub-env
    assert (data["obs"][:, 1] % (length + 1) != length).all()  # no autoreset step
    batch = st.sample(16)
    assert _storage_ptr(batch["obs"]) != _storage_ptr(st.store.ring.data["obs"])  # an off-policy learner's copy


def test_preprocessed_observations_of_a_strided_record_are_stored_once_each():
    records = _records(2, 8, 3, 4, 5)
    plain, scaled = Storage(1000, seed=0), Storage(1000, seed=0, obs_preprocessor=lambda x: x * 2)
    for td in records:
        plain.add_rollout(td)
        scaled.add_rollout(td)
    assert torch.equal(scaled.get_data()["obs"], plain.get_data()["obs"] * 2)
    assert torch.equal(scaled.get_data()["next_obs"], plain.get_data()["next_obs"] * 2)


# ---------------------------------------------------------------- on-policy: the learner reads the ring


def _filled(sampler="all", seed=3, count=3, unit="transition"):
    st = Storage(1000, seed=seed, sampler=sampler, unit=unit)
    for td in _records(3, 8, count, 4, 5):
        st.add_rollout(td)
    st.truncate_episodes(["Copies-0"])
    return st


@pytest.mark.parametrize(
    "sampler, unit, clear_after, parts",
    [
        ("uniform", "transition", True, 1),
        ("prioritized", "transition", True, 1),
        ("batch", "transition", True, 1),
        ("all", "episode", True, 1),
        ("all", "transition", True, 1),  # on-policy: the whole storage, consumed
        ("all", "transition", False, 1),
        ("all", "transition", True, 2),  # one part per train worker: a gather each
    ],
)
def test_every_sample_is_a_writable_copy(sampler, unit, clear_after, parts):
    st = _filled(sampler=sampler, unit=unit)
    batches = st.sample_parts(parts, 4 if sampler != "all" else None, clear_after=clear_after)
    ring = st.store.ring.data["obs"]
    for batch in batches:
        assert _storage_ptr(batch["obs"]) != _storage_ptr(ring)
        assert type(batch["obs"]) is torch.Tensor
        batch["obs"].add_(1)  # a copy: writable


def _trace_engine(engine, monkeypatch):
    """Trace one iteration: the records the storage got, the ring copies reading them, what the learner holds."""
    import rlightning.env.rollout_worker as rollout_worker
    from rlightning.buffer.utils.storage import Storage as StorageCls

    seen = {"records": set(), "arrays": {}, "ring_copies": [], "learner": []}
    real_add, real_copy, real_record = StorageCls.add_rollout, RowRing.copy_rows_to, rollout_worker.arrays_to_record

    def arrays_to_record(arrays, env_id):  # where the driver turns a rollout's arrays into its record
        td = real_record(arrays, env_id)
        seen["arrays"][_storage_ptr(td["obs"])] = (arrays["obs"].ctypes.data, arrays["obs"].flags.writeable)
        return td

    def add_rollout(self, td):
        seen["records"].add(_storage_ptr(td["obs"]))
        return real_add(self, td)

    def copy_rows_to(self, source, idx, dst):
        made = real_copy(self, source, idx, dst)
        if "obs" in source:
            seen["ring_copies"].append((_storage_ptr(source["obs"]), made))
        return made

    monkeypatch.setattr(rollout_worker, "arrays_to_record", arrays_to_record)
    monkeypatch.setattr(StorageCls, "add_rollout", add_rollout)
    monkeypatch.setattr(RowRing, "copy_rows_to", copy_rows_to)
    learner = engine.policy_group.train_workers[0].worker
    real_update = learner.update_dataset

    def update_dataset(data):
        real_update(data)
        ring = engine.buffer.shards.single_local().store.ring
        seen["learner"].append(_storage_ptr(learner.dataset["obs"]) == _storage_ptr(ring.data["obs"]))

    monkeypatch.setattr(learner, "update_dataset", update_dataset)
    return seen


def _count_copies(engine, monkeypatch, iterations=2):
    seen = _trace_engine(engine, monkeypatch)
    for _ in range(iterations):
        engine.step()
    ring_copies = [made for ptr, made in seen["ring_copies"] if ptr in seen["records"]]
    assert ring_copies and len(ring_copies) == len(seen["ring_copies"])  # every ring write reads a record
    assert set(ring_copies) == {1}  # record -> ring: one copy (the first write, allocating the ring, aside)
    assert seen["learner"] and not any(seen["learner"])  # ring -> learner: a gather (the third copy)
    assert seen["records"] <= set(seen["arrays"])  # each record is the rollout's arrays, not a copy of them
    assert all(ptr == arrays_ptr for ptr, (arrays_ptr, _) in seen["arrays"].items())
    return [writeable for _, writeable in seen["arrays"].values()]


def test_the_local_on_policy_path_copies_an_observation_three_times(tmp_path, build, monkeypatch):
    """env output -> record (1), record -> ring (2), ring -> the learner's batch (3)."""
    from tests.support.configs import small_ppo

    engine = build(small_ppo(tmp_path, False, "cluster.inference=env_workers")).engine
    engine.step()  # the first write allocates the ring (gathered, then written)
    writeable = _count_copies(engine, monkeypatch)
    assert writeable and all(writeable)  # records made in this process: the env worker's own arrays


@pytest.mark.ray
def test_on_ray_env_workers_the_on_policy_path_copies_an_observation_four_times(
    tmp_path, ray_runtime, build, monkeypatch
):
    """env output -> record (1), record -> object store (2, pickle-5 buffers), store -> ring (3), ring -> the
    learner's batch (4): the driver's ``ray.get`` is zero-copy (the records arrive read-only)."""
    from tests.support.configs import small_ppo

    cfg = small_ppo(tmp_path, False, "cluster.remote_env=true", "env.num_cpus=0.25", "cluster.inference=env_workers")
    engine = build(cfg).engine
    assert engine.env_group.is_remote
    engine.step()
    writeable = _count_copies(engine, monkeypatch)
    assert writeable and not any(writeable)  # read-only: views of the object store, not copies
