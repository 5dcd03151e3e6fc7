"""Several gradient steps in one call: `train_minibatches` runs ``train()`` on consecutive row ranges of the dataset.

An off-policy learner's engine draws the ``k`` batches of an iteration in one buffer sample (``k x batch``
rows, the same distribution as ``k`` independent batches with the uniform sampler) and hands them over in
one call per train worker, instead of one sample, one ``update_dataset`` and one ``train`` per gradient
step. Each minibatch is then exactly what ``update_dataset(rows)`` would have made of it: the learning
rule and the order of the updates do not change.

    policy.update_dataset(batch)              # k x 64 rows
    metrics = policy.train_minibatches(k)     # k x train(), on rows [0, 64), [64, 128), ...

Pure torch; never imports Ray.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional

import numpy as np
import torch

__all__ = ["dataset_rows", "mean_metrics", "slice_rows", "train_minibatches"]


_TD_BASE: Any = None


def _is_tensordict(value: Any) -> bool:
    global _TD_BASE
    if type(value) is dict:  # the usual dataset: no ABC check
        return False
    if _TD_BASE is None:
        from tensordict import TensorDictBase  # here, not at import: acting copies never need it

        _TD_BASE = TensorDictBase
    return isinstance(value, _TD_BASE)


def dataset_rows(dataset: Any) -> int:
    """Rows of a dataset: a tensor's or TensorDict's leading size, or a dict's first such value's.

    Raises:
        TypeError: nothing with rows in it (a dataset `slice_rows` cannot split).
    """
    if isinstance(dataset, torch.Tensor) and dataset.ndim:
        return int(dataset.shape[0])
    if _is_tensordict(dataset) and dataset.batch_dims:
        return int(dataset.batch_size[0])
    if isinstance(dataset, Mapping):
        for value in dataset.values():
            if value is not None:
                return dataset_rows(value)
    raise TypeError(
        f"train_minibatches splits a tensor, a TensorDict or a dict of them by rows; got {type(dataset).__name__} "
        "(override train_minibatches for another dataset)"
    )


def slice_rows(dataset: Any, start: int, stop: int) -> Any:
    """Rows ``[start, stop)`` of a tensor, TensorDict or dict of them (None values stay None); views, no copy."""
    if dataset is None:
        return None
    if isinstance(dataset, torch.Tensor) or _is_tensordict(dataset):
        return dataset[start:stop]
    if isinstance(dataset, Mapping):
        return {k: slice_rows(v, start, stop) for k, v in dataset.items()}
    raise TypeError(f"train_minibatches cannot split a {type(dataset).__name__} by rows")


def mean_metrics(per_step: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Each numeric metric's mean over the steps (float64, as the engine averages its train rounds);
    other values as the last step left them."""
    out: Dict[str, Any] = {}
    for key in dict.fromkeys(k for m in per_step for k in m):
        values = [m[key] for m in per_step if key in m]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        out[key] = float(np.mean(np.asarray(values, dtype=np.float64))) if numeric else values[-1]
    return out


def train_minibatches(
    policy: Any, num_minibatches: int, after_step: Optional[Callable[[], None]] = None
) -> Dict[str, Any]:
    """``num_minibatches`` x ``policy.train()``, the i-th on rows ``[i n / k, (i + 1) n / k)`` of its dataset.

    The dataset (what ``update_dataset`` made of the sample) is split by rows, in order: minibatch ``i`` is the
    ``i``-th ``batch_size`` rows of a sample of ``k x batch_size``. The policy's dataset is the whole one again
    afterwards. ``after_step``: called after each ``train()`` (e.g. to collect what the step left behind).

    Returns:
        The mean of each numeric metric over the minibatches.

    Raises:
        ValueError: ``num_minibatches`` not a positive integer, or more minibatches than rows.
        RuntimeError: no dataset yet.
    """
    if isinstance(num_minibatches, bool) or not isinstance(num_minibatches, (int, np.integer)) or num_minibatches < 1:
        raise ValueError(f"train_minibatches needs a positive integer number of minibatches, got {num_minibatches!r}")
    full = policy.dataset
    if full is None:
        raise RuntimeError(f"{type(policy).__name__}.train_minibatches called before update_dataset(data)")
    k = int(num_minibatches)
    if k == 1:
        metrics = policy.train()
        if after_step is not None:
            after_step()
        return metrics
    n = dataset_rows(full)
    if n < k:
        raise ValueError(f"train_minibatches({k}): the dataset holds {n} rows, fewer than one per minibatch")
    per_step = []
    try:
        for i in range(k):
            policy.dataset = slice_rows(full, n * i // k, n * (i + 1) // k)
            per_step.append(policy.train())
            if after_step is not None:
                after_step()
    finally:
        policy.dataset = full
    return mean_metrics(per_step)
