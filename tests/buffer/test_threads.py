"""A local buffer read from another thread (a notebook view refreshing) while the engine's thread writes."""

import sys
import threading

import pytest
import torch

from rlightning.buffer import RolloutBuffer
from rlightning.utils.config import BufferConfig
from rlightning.utils.ray.handle import WorkerHandle, worker_lock
from tests.buffer.test_data_buffer import make_envs, run
from tests.support.buffer_fakes import check_transitions


def _buffer(envs):
    buf = RolloutBuffer(config=BufferConfig(capacity=100_000, seed=0))
    buf.init([e.meta for e in envs], num_storages=1, num_train_workers=1)
    return buf


@pytest.fixture
def fast_switching():
    """Switch threads every few microseconds (not every 5 ms) so that interleavings actually happen."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(before)


def test_views_reading_while_the_engine_writes_see_and_leave_whole_episodes(fast_switching, monkeypatch):
    # the writer flushes its queue every few episodes, so its writes and the reader's flushes meet often
    envs = make_envs(2, num_envs=4, lengths=(2, 3, 5, 7))
    twin_envs = make_envs(2, num_envs=4, lengths=(2, 3, 5, 7))
    buf, twin = _buffer(envs), _buffer(twin_envs)
    stop = threading.Event()
    reads, errors = [0], []

    def view() -> None:  # what BufferViewWidget.refresh does, as fast as it can
        while not stop.is_set():
            try:
                stats = buf.stats()
                assert stats["size"] == sum(s["size"] for s in stats["shards"])
                if stats["size"]:
                    buf.sample_rows(3)
                reads[0] += 1
            except Exception as err:  # noqa: BLE001 - reported by the test
                errors.append(repr(err))
                return

    reader = threading.Thread(target=view, daemon=True)
    reader.start()
    rets = None
    try:
        for _ in range(30):
            rets = run(buf, envs, 10, rets)
    finally:
        stop.set()
        reader.join(timeout=30)
    run(twin, twin_envs, 300)
    assert not errors, errors[:3]
    assert reads[0] > 10, "the reader thread hardly ran"
    buf.truncate_episodes()
    twin.truncate_episodes()
    a, b = buf.get_data(), twin.get_data()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a.keys())
    check_transitions(a[a["obs"][:, 4] == 0], envs[0].lengths)
    assert buf.stats()["transitions_written"] == twin.stats()["transitions_written"] == len(a)


def test_local_calls_are_serialised_per_worker_like_an_actor(fast_switching):
    class Slow:
        def __init__(self):
            self.inside = 0
            self.overlaps = 0

        def work(self):
            self.inside += 1
            self.overlaps += self.inside > 1
            for _ in range(20_000):
                pass
            self.inside -= 1

    worker = Slow()
    handles = [WorkerHandle(worker), WorkerHandle(worker)]  # two handles, one worker: one lock
    assert handles[0].lock is handles[1].lock is worker_lock(worker)
    assert WorkerHandle(Slow()).lock is not handles[0].lock

    def hammer(h):
        for _ in range(200):
            h.call("work")
            h.submit("work").result()

    threads = [threading.Thread(target=hammer, args=(h,)) for h in handles]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert worker.overlaps == 0
