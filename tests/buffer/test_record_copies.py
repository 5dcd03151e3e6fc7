"""Copies of an observation on the record path (issue 15), counted with storage pointers.

Off-policy: env output -> record, record -> ring, ring -> sampled batch (3; 4 with Ray env workers: the
object store). On-policy (PPO, rollout buffer, ``all`` sampler): the learner reads the ring's rows in
place, so 2 locally and 3 with Ray env workers (env output -> record -> object store -> ring). The storage
copies nothing before the ring (no record -> flat chunk copy)."""

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


def test_an_on_policy_sample_is_the_stored_rows_in_place_with_the_draw_as_order():
    lent_st, copy_st = _filled(), _filled()
    ring_obs = _storage_ptr(lent_st.store.ring.data["obs"])
    (lent,) = lent_st.sample_parts(1, None, clear_after=True, views=True)
    (copied,) = copy_st.sample_parts(1, None, clear_after=True)
    assert lent_st.size == 0 and copy_st.size == 0
    for key in ("obs", "next_obs", "action", "advantage" if "advantage" in lent.keys() else "reward"):
        assert _storage_ptr(lent[key]) == _storage_ptr(lent_st.store.ring.data[key]), key  # no copy
        assert _storage_ptr(copied[key]) != _storage_ptr(copy_st.store.ring.data[key]), key
    assert _storage_ptr(lent["obs"]) == ring_obs
    order = lent["_order"]
    assert sorted(order.tolist()) == list(range(len(lent)))
    assert set(copied.keys()) | {"_order"} == set(lent.keys())
    for key in copied.keys():  # the same seeded draw: the lent rows in the draw's order are the copy
        assert torch.equal(lent[key][order], copied[key]), key


@pytest.mark.parametrize(
    "sampler, unit, views, clear_after, parts",
    [
        ("uniform", "transition", True, True, 1),
        ("prioritized", "transition", True, True, 1),
        ("batch", "transition", True, True, 1),
        ("all", "episode", True, True, 1),
        ("all", "transition", False, True, 1),
        ("all", "transition", True, False, 1),  # a sample that does not consume the data: a copy
        ("all", "transition", True, True, 2),  # one part per train worker: a gather each
    ],
)
def test_every_other_sample_is_still_a_copy(sampler, unit, views, clear_after, parts):
    st = _filled(sampler=sampler, unit=unit)
    batches = st.sample_parts(parts, 4 if sampler != "all" else None, clear_after=clear_after, views=views)
    ring = st.store.ring.data["obs"]
    for batch in batches:
        assert "_order" not in batch.keys()
        assert _storage_ptr(batch["obs"]) != _storage_ptr(ring)
        assert type(batch["obs"]) is torch.Tensor
        batch["obs"].add_(1)  # a copy: writable


def test_lent_rows_are_read_only_through_slices_rows_and_numpy():
    st = _filled()
    (batch,) = st.sample_parts(1, None, clear_after=True, views=True)
    before = st.store.ring.data["obs"].clone()
    writes = {
        "in-place method": lambda: batch["obs"].mul_(2),
        "item": lambda: batch["obs"].__setitem__(0, 5.0),
        "slice": lambda: batch[2:5]["obs"].zero_(),
        "row": lambda: batch[3]["obs"].fill_(1.0),
        "reshaped": lambda: batch["obs"].reshape(-1).add_(1),
        "out=": lambda: torch.add(batch["reward"], 1, out=batch["reward"]),
        "copy into": lambda: batch["next_obs"][0].copy_(torch.zeros(4)),
        "tensordict": lambda: batch.apply_(lambda t: t.zero_()),
    }
    for name, write in writes.items():
        with pytest.raises(TypeError, match="read-only"):
            write()
        assert torch.equal(st.store.ring.data["obs"], before), name
    with pytest.raises(ValueError, match="read-only"):
        batch["obs"].numpy()[0, 0] = 1.0
    obs = batch["obs"]
    obs += 1  # rebinds obs to a new tensor, as for an immutable value
    assert torch.equal(st.store.ring.data["obs"], before)
    gathered = batch[batch["_order"]]  # a gather: a plain, writable copy
    gathered["obs"].mul_(2)
    assert type(gathered["obs"]) is torch.Tensor and torch.equal(st.store.ring.data["obs"], before)
    assert "ReadOnlyTensor" in repr(batch["obs"][:1])


def test_adds_after_a_lend_never_change_the_lent_rows():
    st = _filled()
    ring = st.store.ring
    (first,) = st.sample_parts(1, None, clear_after=True, views=True)
    kept = first.clone()
    a = _storage_ptr(ring.data["obs"])
    for td in _records(3, 8, 3, 4, 5):  # the learner still holds `first`: these go to other tensors
        st.add_rollout(td)
    st.truncate_episodes(["Copies-0"])
    assert ring.moves == 1 and _storage_ptr(ring.data["obs"]) != a
    assert all(torch.equal(first[k], kept[k]) for k in kept.keys())
    b = _storage_ptr(ring.data["obs"])
    (second,) = st.sample_parts(1, None, clear_after=True, views=True)
    del first, kept  # the learner took the next sample: the first tensors are free again
    for td in _records(3, 8, 2, 4, 5):
        st.add_rollout(td)
    assert ring.moves == 2 and _storage_ptr(ring.data["obs"]) == a  # the two sets alternate, none allocated
    held = second.clone()
    assert all(torch.equal(second[k], held[k]) for k in held.keys())
    del second, held
    st.sample_parts(1, None, clear_after=True, views=True)  # dropped at once
    for td in _records(3, 8, 2, 4, 5):
        st.add_rollout(td)
    assert ring.moves == 2 and _storage_ptr(ring.data["obs"]) == a and b != a  # released: written in place


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
        lent = {_storage_ptr(ring.data["obs"])} | ({_storage_ptr(ring._spare["obs"])} if ring._spare else set())
        seen["learner"].append(_storage_ptr(learner.dataset["obs"]) in lent)

    monkeypatch.setattr(learner, "update_dataset", update_dataset)
    return seen


def _count_copies(engine, monkeypatch, iterations=2):
    seen = _trace_engine(engine, monkeypatch)
    for _ in range(iterations):
        engine.step()
    ring_copies = [made for ptr, made in seen["ring_copies"] if ptr in seen["records"]]
    assert ring_copies and len(ring_copies) == len(seen["ring_copies"])  # every ring write reads a record
    assert set(ring_copies) == {1}  # record -> ring: one copy (the first write, allocating the ring, aside)
    assert seen["learner"] and all(seen["learner"])  # ring -> learner: none
    assert seen["records"] <= set(seen["arrays"])  # each record is the rollout's arrays, not a copy of them
    assert all(ptr == arrays_ptr for ptr, (arrays_ptr, _) in seen["arrays"].items())
    return [writeable for _, writeable in seen["arrays"].values()]


def test_the_local_on_policy_path_copies_an_observation_twice(tmp_path, build, monkeypatch):
    """env output -> record (1), record -> ring (2); the learner reads the ring in place."""
    from tests.support.configs import small_ppo

    engine = build(small_ppo(tmp_path, False, "cluster.inference=env_workers")).engine
    assert engine._lent_rows()
    engine.step()  # the first write allocates the ring (gathered, then written)
    writeable = _count_copies(engine, monkeypatch)
    assert writeable and all(writeable)  # records made in this process: the env worker's own arrays


@pytest.mark.ray
def test_on_ray_env_workers_the_on_policy_path_copies_an_observation_three_times(
    tmp_path, ray_runtime, build, monkeypatch
):
    """env output -> record (1), record -> object store (2, pickle-5 buffers), store -> ring (3): the driver's
    ``ray.get`` is zero-copy (the records arrive read-only) and the learner reads the ring in place."""
    from tests.support.configs import small_ppo

    cfg = small_ppo(tmp_path, False, "cluster.remote_env=true", "env.num_cpus=0.25", "cluster.inference=env_workers")
    engine = build(cfg).engine
    assert engine.env_group.is_remote and engine._lent_rows()
    engine.step()
    writeable = _count_copies(engine, monkeypatch)
    assert writeable and not any(writeable)  # read-only: views of the object store, not copies


def test_ppo_trains_on_the_lent_rows_without_changing_them_and_as_on_a_copy(tmp_path, build):
    """Same seed: PPO on the lent rows (through ``_order``) makes the very updates it makes on a shuffled copy."""
    from tests.support.configs import small_ppo

    results = []
    for lend in (True, False):
        engine = build(small_ppo(tmp_path / str(lend), False, "cluster.inference=env_workers")).engine
        engine._lend = lend  # the engine's choice, forced off for the copy
        storage = engine.buffer.shards.single_local()
        learner = engine.policy_group.train_workers[0].worker
        losses = []
        for _ in range(3):
            engine.rollout()
            size = storage.size
            stored = {k: v[:size].clone() for k, v in storage.store.ring.data.items()}
            lent_ring = storage.store.ring.data
            engine.update_dataset()
            assert (learner.dataset_order is not None) is lend
            assert (_storage_ptr(learner.dataset["obs"]) == _storage_ptr(lent_ring["obs"])) is lend
            metrics = engine.train()
            assert all(torch.equal(lent_ring[k][:size], v) for k, v in stored.items())  # untouched by training
            losses.append((metrics["policy_loss"], metrics["value_loss"], metrics["explained_variance"]))
            engine.sync_weights()
        results.append((losses, learner.weights_checksum()))
    assert results[0] == results[1]


def test_ppo_refuses_an_order_that_does_not_index_its_rows(tmp_path, build):
    from tests.support.configs import small_ppo

    engine = build(small_ppo(tmp_path, False, "cluster.inference=env_workers")).engine
    engine.rollout()
    (batch,) = engine.buffer.sample(views=True)
    learner = engine.policy_group.train_workers[0].worker
    with pytest.raises(ValueError, match="_order"):
        learner.update_dataset(batch[: len(batch) // 2])  # a slice keeps the draw over the whole sample
    learner.update_dataset(batch[batch["_order"]].exclude("_order"))  # the shuffled copy: fine
    assert learner.dataset_order is None
