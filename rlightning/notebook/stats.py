"""Statistics over seeds with rliable (Agarwal et al. 2021, "Deep RL at the Edge of the Statistical
Precipice"): mean, median and IQM of final returns with stratified-bootstrap intervals, the probability
of improvement of one config over another, and a mean return curve with a 95% bootstrap band.

Scores are rliable's ``(runs, tasks)`` matrices: one final score per seed gives one task. rliable's
median is the median over tasks of each task's mean over runs, so with one task it equals the mean;
the IQM (the mean of the middle half) is over every run of every task.

    exp = lab.seeds(cfg, seeds=5); exp.wait()
    scores = final_scores(exp)          # {"lr=0.001": array of one final return per seed}
    aggregates(scores)                  # DataFrame: mean/median/iqm with their lo/hi bounds
    curve_band(exp)                     # DataFrame per config: env_steps, mean, lo, hi
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Mapping, Optional, Tuple

import numpy as np

#: Resamples of each bootstrap.
REPS = 2000
#: The aggregates of `aggregates`, in rliable's order of the paper's figures.
AGGREGATES = ("mean", "median", "iqm")


def _import_arch_bootstrap() -> None:
    """Import ``arch.bootstrap`` (rliable's stratified bootstrap derives from it).

    arch < 8 (the versions rliable 1.2 accepts) fails at ``import arch`` on pandas 3: its package
    ``__init__`` imports ``arch.univariate``, whose ``deprecate_kwarg`` call pandas 3 no longer takes.
    The bootstrap subpackage does not need it, so there only ``arch.bootstrap`` is loaded, under a
    package module that skips ``arch/__init__``.
    """
    import importlib
    import importlib.metadata
    import importlib.util
    import sys
    import types

    def major(dist: str) -> int:
        return int(importlib.metadata.version(dist).split(".")[0])

    if "arch" not in sys.modules and major("arch") < 8 and major("pandas") >= 3:
        spec = importlib.util.find_spec("arch")
        package = types.ModuleType("arch")
        package.__path__ = list(spec.submodule_search_locations)
        package.__spec__ = spec
        package.__file__ = spec.origin
        sys.modules["arch"] = package
    importlib.import_module("arch.bootstrap")


def _rliable() -> Tuple[Any, Any]:
    """rliable's ``library`` (bootstrap intervals) and ``metrics`` (aggregates) modules."""
    try:
        _import_arch_bootstrap()
        from rliable import library, metrics
    except ImportError:
        raise ImportError("the statistics over seeds need rliable: pip install 'rlightning[tune]'") from None
    return library, metrics


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """rliable's stratified resampling draws from NumPy's global generator: seed it, then put it back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _matrix(label: str, values: Any) -> np.ndarray:
    """One config's scores as rliable's ``(runs, tasks)`` matrix (a 1-D array is one task)."""
    x = np.asarray(values, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2:
        raise ValueError(
            f"scores[{label!r}] needs at least 2 runs (one score per seed, or a runs x tasks matrix), "
            f"got shape {np.shape(values)}"
        )
    return x


def aggregates(scores: Mapping[str, Any], reps: int = REPS, confidence: float = 0.95, seed: int = 0) -> Any:
    """Mean, median and IQM of each config's final scores, each with rliable's stratified-bootstrap interval.

    Args:
        scores: Config label -> one final score per run (seed), or a ``(runs, tasks)`` matrix.
        reps: Bootstrap resamples.
        confidence: The intervals' level.
        seed: Seed of the resampling (same seed, same intervals).

    Returns:
        A pandas DataFrame indexed by label: ``runs``, then ``mean``/``mean_lo``/``mean_hi`` and likewise
        ``median`` and ``iqm`` (rliable's ``aggregate_mean``, ``aggregate_median``, ``aggregate_iqm``).

    Raises:
        ValueError: a config with fewer than 2 runs (no interval can be drawn).
    """
    import pandas as pd

    library, metrics = _rliable()
    matrices = {label: _matrix(label, values) for label, values in scores.items()}
    fns = (metrics.aggregate_mean, metrics.aggregate_median, metrics.aggregate_iqm)

    def statistic(x: np.ndarray) -> np.ndarray:
        return np.array([fn(x) for fn in fns])

    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            matrices, statistic, reps=reps, confidence_interval_size=confidence
        )
    rows = {}
    for label, x in matrices.items():
        row: Dict[str, float] = {"runs": x.shape[0]}
        for i, name in enumerate(AGGREGATES):
            row.update(
                {
                    name: float(points[label][i]),
                    f"{name}_lo": float(intervals[label][0, i]),
                    f"{name}_hi": float(intervals[label][1, i]),
                }
            )
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def probability_of_improvement(
    x: Any, y: Any, reps: int = REPS, confidence: float = 0.95, seed: int = 0
) -> Dict[str, float]:
    """P(a run of X scores above a run of Y), ties counting half (rliable's, averaged over tasks), with
    rliable's stratified independent-bootstrap interval.

    Args:
        x, y: One final score per run (or ``(runs, tasks)`` matrices with the same tasks).

    Returns:
        ``{"p": ..., "lo": ..., "hi": ...}``.
    """
    library, metrics = _rliable()
    a, b = _matrix("x", x), _matrix("y", y)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"x and y need the same tasks (columns), got {a.shape[1]} and {b.shape[1]}")
    with _seeded(seed):
        points, intervals = library.get_interval_estimates(
            {"x,y": (a, b)},
            metrics.probability_of_improvement,
            reps=reps,
            confidence_interval_size=confidence,
        )
    lo, hi = np.ravel(intervals["x,y"])
    return {"p": float(points["x,y"]), "lo": float(lo), "hi": float(hi)}


def _label(params: Dict[str, Any]) -> str:
    varied = {k: v for k, v in params.items() if k != "seed"}
    return ", ".join(f"{k}={v}" for k, v in varied.items()) or "config"


def final_scores(exp: Any, metric: Optional[str] = None) -> Dict[str, np.ndarray]:
    """Config label (its varied values, seed aside) -> the last reported ``metric`` of each of its trials."""
    metric = metric or exp.spec.metric
    out: Dict[str, list] = {}
    for entry in exp.trials().values():
        values = [r[metric] for r in entry["rows"] if isinstance(r.get(metric), (int, float))]
        if values:
            out.setdefault(_label(entry["params"]), []).append(values[-1])
    return {k: np.asarray(v, dtype=float) for k, v in out.items()}


def curves_on_grid(exp: Any, metric: Optional[str] = None, points: int = 50) -> Dict[str, Tuple[np.ndarray, Any]]:
    """Config label -> (env-step grid, ``(runs, points)`` array): every run's ``metric`` curve
    interpolated onto ``points`` env-step values common to that config's runs (configs with one run left out)."""
    metric = metric or exp.spec.metric
    runs: Dict[str, list] = {}
    for entry in exp.trials().values():
        pts = [(r["env_steps"], r[metric]) for r in entry["rows"] if isinstance(r.get(metric), (int, float))]
        if len(pts) >= 2:
            runs.setdefault(_label(entry["params"]), []).append(np.asarray(pts, dtype=float))
    out = {}
    for label, curves in runs.items():
        if len(curves) < 2:
            continue
        grid = np.linspace(max(c[0, 0] for c in curves), min(c[-1, 0] for c in curves), points)
        out[label] = (grid, np.stack([np.interp(grid, c[:, 0], c[:, 1]) for c in curves]))
    return out


def curve_band(
    exp: Any,
    metric: Optional[str] = None,
    points: int = 50,
    reps: int = REPS,
    confidence: float = 0.95,
    seed: int = 0,
) -> Any:
    """Each config's mean ``metric`` against env steps with a bootstrap band over its runs (rliable's
    stratified bootstrap of ``aggregate_mean`` at each point, as its sample-efficiency curves).

    Every run's curve is interpolated onto a common grid of ``points`` env-step values (up to the
    shortest run of that config); configs with a single run have no band and are left out.

    Returns:
        A pandas DataFrame with ``config``, ``env_steps``, ``mean``, ``lo``, ``hi``, ``runs``.
    """
    import pandas as pd

    library, metrics = _rliable()
    grids = curves_on_grid(exp, metric, points)
    if not grids:
        return pd.DataFrame(columns=["config", "env_steps", "mean", "lo", "hi", "runs"])

    def statistic(x: np.ndarray) -> np.ndarray:  # x: (runs, 1 task, points)
        return np.array([metrics.aggregate_mean(x[..., i]) for i in range(x.shape[-1])])

    with _seeded(seed):
        means, bands = library.get_interval_estimates(
            {label: ys[:, None, :] for label, (_, ys) in grids.items()},
            statistic,
            reps=reps,
            confidence_interval_size=confidence,
        )
    frames = [
        pd.DataFrame(
            {
                "config": label,
                "env_steps": grid,
                "mean": means[label],
                "lo": bands[label][0],
                "hi": bands[label][1],
                "runs": len(ys),
            }
        )
        for label, (grid, ys) in grids.items()
    ]
    return pd.concat(frames, ignore_index=True)
