"""rlightning replay buffer: ``DataBuffer`` (the ``replay`` buffer) local, or sharded over 2 Ray actors.

``extend`` takes a dict of tensors (1000 rows); ``sample(256)`` returns one
TensorDict per train worker (one here). Sharded: 2 storage actors of half the
capacity each, the rows split evenly over them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import _common as c

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
c.set_threads()

from rlightning.buffer import ReplayBuffer  # noqa: E402
from rlightning.utils.config import BufferConfig  # noqa: E402


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mode", default="local", choices=["local", "sharded"]))
    shards = 2 if a.mode == "sharded" else 1
    if shards > 1:
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)

    def make(kind, cap, data):
        buf = ReplayBuffer(config=BufferConfig(capacity=cap // shards, seed=0), remote=shards > 1)
        return buf.init([], num_storages=shards, num_train_workers=1, storage_options={"num_cpus": 1})

    c.run_buffer_cases(
        a.cases or list(c.BUFFER_CASES),
        a.quick,
        a.repeats,
        make=make,
        extend=lambda buf, data: buf.extend(data),
        sample=lambda buf: buf.sample(c.BATCH),
    )
    if shards > 1:
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


if __name__ == "__main__":
    main()
