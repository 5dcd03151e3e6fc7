"""Small worker classes the Ray-layer tests launch as actors."""

import os

from rlightning.utils.ray.remote_class import DistributedMixin


class Counter:
    def __init__(self, start: int = 0, step: int = 1) -> None:
        self.value = start
        self.step = step

    def incr(self) -> int:
        self.value += self.step
        return self.value

    def fail(self) -> None:
        raise ValueError("counter refused")

    def env(self, name: str):
        return os.environ.get(name)


class DistCounter(Counter, DistributedMixin):
    pass
