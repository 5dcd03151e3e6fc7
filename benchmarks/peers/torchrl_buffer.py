"""TorchRL replay buffer: ``ReplayBuffer(LazyTensorStorage(capacity))``, uniform sampling, TensorDict chunks."""

from __future__ import annotations

import _common as c

c.set_threads()

from tensordict import TensorDict  # noqa: E402
from torchrl.data import LazyTensorStorage, ReplayBuffer  # noqa: E402


def main() -> None:
    a = c.args()
    c.run_buffer_cases(
        a.cases or list(c.BUFFER_CASES),
        a.quick,
        a.repeats,
        make=lambda kind, cap, data: ReplayBuffer(storage=LazyTensorStorage(cap), batch_size=c.BATCH),
        extend=lambda buf, data: buf.extend(TensorDict(data, batch_size=[c.CHUNK])),
        sample=lambda buf: buf.sample(),
    )


if __name__ == "__main__":
    main()
