"""Observation and reward preprocessors applied before data is stored.

A `Preprocessor` maps a batch (a numpy array whose leading dimension is the
number of sub-environments) to a batch. The built-ins:

- `IdentityPreprocessor`: unchanged (optionally cast to a dtype).
- `FlattenPreprocessor`: ``[N, *shape]`` to ``[N, prod(shape)]`` (Box observations).
- `OneHotPreprocessor`: ``[N]`` integers to ``[N, n]`` float32 (Discrete observations).
- `RunningMeanStdPreprocessor`: normalise by running mean and std (observations),
  or only scale by the running std (``center=False``: rewards).
- `ComposePreprocessor`: several in a row.

Preprocessors never import Ray; stateful ones travel to storage actors by pickling.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Sequence, Tuple

import numpy as np

__all__ = [
    "ComposePreprocessor",
    "FlattenPreprocessor",
    "IdentityPreprocessor",
    "OneHotPreprocessor",
    "Preprocessor",
    "RunningMeanStdPreprocessor",
    "preprocessor_for_space",
]


def to_numpy(x: Any) -> np.ndarray:
    """Return ``x`` as a numpy array (torch tensors are detached and moved to the CPU)."""
    if isinstance(x, np.ndarray):
        return x
    detach = getattr(x, "detach", None)
    if detach is not None:
        return detach().cpu().numpy()
    return np.asarray(x)


class Preprocessor:
    """Base class: transforms a batch ``[N, ...]`` into a batch ``[N, ...]``.

    Subclasses implement `transform`. Stateful ones (running statistics)
    update their state in `transform` when ``update`` is True and expose it
    through `state_dict` / `load_state_dict`.
    """

    def __call__(self, x: Any) -> np.ndarray:
        return self.transform(to_numpy(x))

    def transform(self, x: np.ndarray) -> np.ndarray:
        """Transform one batch."""
        raise NotImplementedError

    def state_dict(self) -> Dict[str, Any]:
        """The preprocessor's state (empty for stateless ones)."""
        return {}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restore the state returned by `state_dict`."""
        if state:
            raise KeyError(f"{type(self).__name__} is stateless but got state keys {sorted(state)}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class IdentityPreprocessor(Preprocessor):
    """Return the batch unchanged, optionally cast to ``dtype``.

    Args:
        dtype: Cast to this numpy dtype (None keeps the input's).
    """

    def __init__(self, dtype: Optional[Any] = None) -> None:
        self.dtype = None if dtype is None else np.dtype(dtype)

    def transform(self, x: np.ndarray) -> np.ndarray:
        if self.dtype is None or x.dtype == self.dtype:
            return x
        return x.astype(self.dtype)

    def __repr__(self) -> str:
        return f"IdentityPreprocessor(dtype={self.dtype})"


class FlattenPreprocessor(Preprocessor):
    """Flatten every sub-environment's observation: ``[N, *shape]`` to ``[N, prod(shape)]``."""

    def transform(self, x: np.ndarray) -> np.ndarray:
        if x.ndim == 0:
            raise ValueError(f"FlattenPreprocessor needs a batch with a leading env dimension, got a scalar {x!r}")
        return x.reshape(x.shape[0], -1)


class OneHotPreprocessor(Preprocessor):
    """One-hot encode integer observations: ``[N]`` to ``[N, n]`` float32.

    Args:
        n: Number of categories (``Discrete(n).n``).
    """

    def __init__(self, n: int) -> None:
        if not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"OneHotPreprocessor n must be a positive integer, got {n!r}")
        self.n = int(n)

    def transform(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x).reshape(-1)
        if x.size and (x.min() < 0 or x.max() >= self.n):
            raise ValueError(
                f"OneHotPreprocessor(n={self.n}) got values outside [0, {self.n}): min {x.min()}, max {x.max()}"
            )
        out = np.zeros((x.shape[0], self.n), dtype=np.float32)
        out[np.arange(x.shape[0]), x.astype(np.int64)] = 1.0
        return out

    def __repr__(self) -> str:
        return f"OneHotPreprocessor(n={self.n})"


class RunningMeanStdPreprocessor(Preprocessor):
    """Normalise with a running mean and std over every batch seen.

    With ``center=True`` (observations) the output is ``(x - mean) / std``;
    with ``center=False`` (rewards) it is ``x / std``. Statistics are per
    feature, over the batch dimension, updated before transforming.

    Args:
        center: Subtract the running mean.
        clip: Clip the output to ``[-clip, clip]`` (None: no clipping).
        eps: Added to the variance.
        update: Update the statistics on every call (False: frozen).
    """

    def __init__(self, center: bool = True, clip: Optional[float] = 10.0, eps: float = 1e-8, update: bool = True):
        if clip is not None and clip <= 0:
            raise ValueError(f"RunningMeanStdPreprocessor clip must be positive or None, got {clip!r}")
        self.center = center
        self.clip = clip
        self.eps = eps
        self.update = update
        self.mean: Optional[np.ndarray] = None
        self.var: Optional[np.ndarray] = None
        self.count = 0.0

    def _update(self, x: np.ndarray) -> None:
        x = x.astype(np.float64, copy=False)
        if x.ndim and not np.isfinite(x).all():  # a NaN or inf row must not poison the statistics
            x = x[np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)]
        n = x.shape[0]
        if n == 0:
            return
        b_mean = x.mean(axis=0)
        b_var = x.var(axis=0)
        if self.mean is None:
            self.mean, self.var, self.count = b_mean, b_var, float(n)
            return
        total = self.count + n
        delta = b_mean - self.mean
        self.mean = self.mean + delta * (n / total)
        m2 = self.var * self.count + b_var * n + delta**2 * (self.count * n / total)
        self.var = m2 / total
        self.count = total

    def transform(self, x: np.ndarray) -> np.ndarray:
        if self.update:
            self._update(x)
        if self.mean is None:
            return x.astype(np.float32)
        std = np.sqrt(self.var + self.eps)
        out = (x - self.mean) / std if self.center else x / std
        if self.clip is not None:
            out = np.clip(out, -self.clip, self.clip)
            bad = ~np.isfinite(x)
            if bad.any():  # keep NaN and inf visible to the storage's nan_guard (clipping would turn inf into 10)
                out[bad] = x[bad]
        return out.astype(np.float32)

    def state_dict(self) -> Dict[str, Any]:
        return {"mean": self.mean, "var": self.var, "count": self.count}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        missing = {"mean", "var", "count"} - set(state)
        if missing:
            raise KeyError(f"RunningMeanStdPreprocessor state is missing {sorted(missing)}")
        self.mean, self.var, self.count = state["mean"], state["var"], float(state["count"])

    def __repr__(self) -> str:
        return f"RunningMeanStdPreprocessor(center={self.center}, clip={self.clip}, count={self.count:g})"


class ComposePreprocessor(Preprocessor):
    """Apply several preprocessors in order.

    Args:
        preprocessors: Preprocessors or plain callables on a batch; None entries are skipped.
    """

    def __init__(self, *preprocessors: Any) -> None:
        self.preprocessors = [p for p in preprocessors if p is not None]

    def transform(self, x: np.ndarray) -> np.ndarray:
        for p in self.preprocessors:
            x = to_numpy(p(x))
        return x

    def state_dict(self) -> Dict[str, Any]:
        return {str(i): p.state_dict() for i, p in enumerate(self.preprocessors) if isinstance(p, Preprocessor)}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        for i, p in enumerate(self.preprocessors):
            if str(i) in state and isinstance(p, Preprocessor):
                p.load_state_dict(state[str(i)])

    def __repr__(self) -> str:
        return f"ComposePreprocessor({', '.join(repr(p) for p in self.preprocessors)})"


def preprocessor_for_space(space: Any, flatten: bool = False) -> Preprocessor:
    """A sensible preprocessor for a gymnasium space.

    Args:
        space: ``Discrete`` gives one-hot; ``Box`` gives identity (or flatten with ``flatten``).
        flatten: Flatten multi-dimensional Box observations.

    Raises:
        TypeError: a space that is neither Box nor Discrete.
    """
    name = type(space).__name__
    if name == "Discrete":
        return OneHotPreprocessor(int(space.n))
    if name == "Box":
        return FlattenPreprocessor() if flatten and len(space.shape) > 1 else IdentityPreprocessor()
    raise TypeError(f"preprocessor_for_space supports Box and Discrete spaces, got {name}")


def space_spec(space: Any) -> Optional[Tuple[Tuple[int, ...], np.dtype]]:
    """(shape, dtype) of one sample of a gymnasium space, or None when it has neither."""
    shape = getattr(space, "shape", None)
    dtype = getattr(space, "dtype", None)
    if shape is None or dtype is None:
        return None
    return tuple(int(s) for s in shape), np.dtype(dtype)


def shapes_str(shapes: Sequence[int]) -> str:
    """Render a shape as ``(a, b)``."""
    return "(" + ", ".join(str(int(s)) for s in shapes) + ("," if len(shapes) == 1 else "") + ")"
