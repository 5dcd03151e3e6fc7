"""Samplers: which stored slots a batch is drawn from.

A sampler works on slot indices ``[0, size)`` of one storage shard (slots of
transitions, or of episodes with ``unit="episode"``). It never touches the
data itself; the storage gathers the rows.

- ``uniform``: with replacement.
- ``all``: every stored slot, shuffled (on-policy).
- ``batch``: without replacement, epoch by epoch over a permutation.
- ``prioritized``: proportional prioritized replay over a sum tree;
  `PrioritizedSampler.update_priorities` feeds it, and batches carry
  importance weights.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import numpy as np
import torch

__all__ = [
    "SAMPLERS",
    "AllSampler",
    "BatchSampler",
    "PrioritizedSampler",
    "Sampler",
    "SumTree",
    "UniformSampler",
    "make_sampler",
]


class Sampler:
    """Base class: chooses slot indices in ``[0, size)``.

    Args:
        capacity: Number of slots of the storage.
        seed: Seed of the sampler's random generator (None: nondeterministic).
    """

    name = "base"
    #: Draws exactly the requested number of rows (False: ``all`` ignores the count).
    sized = True

    def __init__(self, capacity: int, seed: Optional[int] = None) -> None:
        self.capacity = int(capacity)
        # Unseeded samplers use torch's global generator (slightly cheaper per draw).
        self.generator: Optional[torch.Generator] = None
        if seed is not None:
            self.generator = torch.Generator()
            self.generator.manual_seed(int(seed))

    def sample(self, n: int, size: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Return ``n`` slot indices (int64) and extra per-row tensors (e.g. importance weights)."""
        raise NotImplementedError

    def on_write(self, slots: torch.Tensor) -> None:
        """Slots that were (over)written with new data."""

    def on_clear(self) -> None:
        """The storage was cleared."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(capacity={self.capacity})"


class UniformSampler(Sampler):
    """Uniform sampling with replacement."""

    name = "uniform"

    def sample(self, n: int, size: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        return torch.randint(size, (n,), generator=self.generator), {}


class AllSampler(Sampler):
    """Every stored slot once, shuffled; the requested count is ignored."""

    name = "all"
    sized = False

    def sample(self, n: int, size: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        return torch.randperm(size, generator=self.generator), {}


class BatchSampler(Sampler):
    """Batches without replacement: walks a random permutation, a new one each epoch.

    A new permutation is also drawn when the number of stored slots changed.
    No slot appears twice in one batch.
    """

    name = "batch"

    def __init__(self, capacity: int, seed: Optional[int] = None) -> None:
        super().__init__(capacity, seed)
        self._perm = torch.empty(0, dtype=torch.int64)
        self._pos = 0
        self._size = -1

    def sample(self, n: int, size: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        if size != self._size or self._pos + n > self._perm.shape[0]:
            self._perm = torch.randperm(size, generator=self.generator)
            self._pos = 0
            self._size = size
        out = self._perm[self._pos : self._pos + n]
        self._pos += n
        return out, {}

    def on_clear(self) -> None:
        self._size = -1


class SumTree:
    """A binary sum tree over ``capacity`` leaves (numpy, vectorised updates and searches).

    Args:
        capacity: Number of leaves.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self._leaves = 1 << max(0, (self.capacity - 1).bit_length())
        self._depth = self._leaves.bit_length() - 1
        self._tree = np.zeros(2 * self._leaves, dtype=np.float64)

    @property
    def total(self) -> float:
        """Sum of all leaves."""
        return float(self._tree[1])

    def get(self, index: np.ndarray) -> np.ndarray:
        """Leaf values at ``index``."""
        return self._tree[np.asarray(index, dtype=np.int64) + self._leaves]

    def set(self, index: np.ndarray, value: np.ndarray) -> None:
        """Set leaves (later duplicates win) and refresh their ancestors."""
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        value = np.broadcast_to(np.asarray(value, dtype=np.float64).reshape(-1), index.shape)
        if index.size == 0:
            return
        if index.min() < 0 or index.max() >= self.capacity:
            raise IndexError(f"SumTree index out of range [0, {self.capacity}): {index.min()}..{index.max()}")
        nodes = index + self._leaves
        self._tree[nodes] = value
        for _ in range(self._depth):
            nodes = np.unique(nodes // 2)
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]

    def find(self, mass: np.ndarray) -> np.ndarray:
        """Leaf index for each prefix-sum ``mass`` in ``[0, total)``."""
        mass = np.asarray(mass, dtype=np.float64).copy()
        node = np.ones(mass.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = 2 * node
            left_sum = self._tree[left]
            go_right = mass >= left_sum
            mass = np.where(go_right, mass - left_sum, mass)
            node = np.where(go_right, left + 1, left)
        return np.minimum(node - self._leaves, self.capacity - 1)

    def clear(self) -> None:
        """Set every leaf to zero."""
        self._tree[:] = 0.0


class PrioritizedSampler(Sampler):
    """Proportional prioritized replay (Schaul et al.): P(i) ~ priority_i ** alpha.

    New slots get the largest priority seen so far. Each batch carries
    ``_weight``: importance weights ``(size * P(i)) ** -beta``, divided by the
    batch's largest.

    Args:
        capacity: Number of slots.
        alpha: Priority exponent.
        beta: Importance-weight exponent.
        eps: Added to every priority.
        seed: Seed of the random generator.
    """

    name = "prioritized"

    def __init__(
        self, capacity: int, alpha: float = 0.6, beta: float = 0.4, eps: float = 1e-6, seed: Optional[int] = None
    ) -> None:
        super().__init__(capacity, seed)
        if alpha < 0 or beta < 0 or eps <= 0:
            raise ValueError(
                f"PrioritizedSampler needs alpha >= 0, beta >= 0, eps > 0; got alpha={alpha}, beta={beta}, eps={eps}"
            )
        self.alpha, self.beta, self.eps = float(alpha), float(beta), float(eps)
        self.tree = SumTree(capacity)
        self.max_priority = 1.0
        self._rng = np.random.default_rng(seed)

    def on_write(self, slots: torch.Tensor) -> None:
        self.tree.set(slots.cpu().numpy(), (self.max_priority + self.eps) ** self.alpha)

    def on_clear(self) -> None:
        self.tree.clear()
        self.max_priority = 1.0

    def update_priorities(self, index: torch.Tensor, priority: torch.Tensor) -> None:
        """Set the priorities of sampled slots (e.g. their absolute TD errors).

        Raises:
            ValueError: lengths differ, or a priority is negative or not finite.
            IndexError: a slot outside the storage.
        """
        idx = np.asarray(index.cpu().numpy() if isinstance(index, torch.Tensor) else index).reshape(-1)
        pri = np.asarray(priority.detach().cpu().numpy() if isinstance(priority, torch.Tensor) else priority)
        pri = pri.astype(np.float64).reshape(-1)
        if idx.shape != pri.shape:
            raise ValueError(f"update_priorities got {idx.shape[0]} indices and {pri.shape[0]} priorities")
        if pri.size and (not np.isfinite(pri).all() or pri.min() < 0):
            raise ValueError("update_priorities: priorities must be finite and >= 0")
        if pri.size:
            self.max_priority = max(self.max_priority, float(pri.max()))
        self.tree.set(idx, (pri + self.eps) ** self.alpha)

    def sample(self, n: int, size: int) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        total = self.tree.total
        if total <= 0:
            idx = self._rng.integers(0, size, n)
            return torch.from_numpy(idx.astype(np.int64)), {"_weight": torch.ones(n)}
        bounds = np.linspace(0.0, total, n + 1)
        mass = self._rng.uniform(bounds[:-1], bounds[1:])
        idx = self.tree.find(np.minimum(mass, np.nextafter(total, 0)))
        idx = np.minimum(idx, size - 1)
        prob = self.tree.get(idx) / total
        with np.errstate(divide="ignore"):
            weight = np.power(np.maximum(size * prob, 1e-12), -self.beta)
        weight = weight / weight.max()
        return torch.from_numpy(idx.astype(np.int64)), {"_weight": torch.from_numpy(weight.astype(np.float32))}


SAMPLERS = {
    "uniform": UniformSampler,
    "all": AllSampler,
    "batch": BatchSampler,
    "prioritized": PrioritizedSampler,
}


def make_sampler(name: str, capacity: int, seed: Optional[int] = None, **kwargs: float) -> Sampler:
    """Build a sampler by name (``uniform``, ``all``, ``batch``, ``prioritized``).

    Args:
        name: Sampler name.
        capacity: Slots of the storage.
        seed: Random seed.
        **kwargs: ``alpha``, ``beta``, ``eps`` for the prioritized sampler.

    Raises:
        KeyError: an unknown name (the valid ones are listed).
    """
    if name not in SAMPLERS:
        raise KeyError(f"unknown sampler {name!r}; valid samplers: {', '.join(SAMPLERS)}")
    if name == "prioritized":
        return PrioritizedSampler(capacity, seed=seed, **kwargs)
    return SAMPLERS[name](capacity, seed=seed)  # the priority settings only matter to "prioritized"
