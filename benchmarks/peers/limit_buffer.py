"""The replay buffer limit: preallocated tensors, slice copies in (wrap-around included), ``index_select`` out."""

from __future__ import annotations

import _common as c

c.set_threads()

import torch  # noqa: E402


class Plain:
    def __init__(self, capacity: int, data) -> None:
        self.capacity, self.cursor, self.size = capacity, 0, 0
        self.data = {k: torch.zeros((capacity,) + v.shape[1:], dtype=v.dtype) for k, v in data.items()}

    def extend(self, data) -> None:
        n = len(next(iter(data.values())))
        first = min(n, self.capacity - self.cursor)
        for k, dst in self.data.items():
            dst[self.cursor : self.cursor + first].copy_(data[k][:first])
            if n > first:
                dst[: n - first].copy_(data[k][first:])
        self.cursor = (self.cursor + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch: int):
        idx = torch.randint(self.size, (batch,))
        return {k: v.index_select(0, idx) for k, v in self.data.items()}


def main() -> None:
    a = c.args()
    c.run_buffer_cases(
        a.cases or list(c.BUFFER_CASES),
        a.quick,
        a.repeats,
        make=lambda kind, cap, data: Plain(cap, data),
        extend=lambda buf, data: buf.extend(data),
        sample=lambda buf: buf.sample(c.BATCH),
    )


if __name__ == "__main__":
    main()
