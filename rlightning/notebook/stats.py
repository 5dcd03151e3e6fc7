"""Statistics over seeds, with the estimators of Agarwal et al. (2021, "Deep RL at the Edge of the
Statistical Precipice"): mean, median and IQM of final returns with percentile-bootstrap intervals,
the probability of improvement (the Mann-Whitney U statistic over ``n x m``), and a mean return
curve with a 95% bootstrap band. Computed with ``scipy.stats`` (``bootstrap``, ``trim_mean``,
``mannwhitneyu``): with one task, rliable's stratified bootstrap is this plain bootstrap over runs.

    exp = lab.seeds(cfg, seeds=5); exp.wait()
    scores = final_scores(exp)          # {"lr=0.001": array of one final return per seed}
    aggregates(scores)                  # DataFrame: mean/median/iqm with their lo/hi bounds
    curve_band(exp)                     # DataFrame per config: env_steps, mean, lo, hi
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

#: Resamples of each bootstrap.
REPS = 2000


def iqm(scores: np.ndarray, axis: Optional[int] = None) -> Any:
    """Interquartile mean: the mean of the middle 50% of the scores (25% cut at each end)."""
    from scipy.stats import trim_mean

    return trim_mean(scores, 0.25, axis=axis)


ESTIMATORS: Dict[str, Callable[..., Any]] = {"mean": np.mean, "median": np.median, "iqm": iqm}


def _bootstrap(data: Tuple[np.ndarray, ...], statistic: Callable, reps: int, confidence: float, seed: int) -> Tuple:
    from scipy.stats import bootstrap

    res = bootstrap(
        data,
        statistic,
        n_resamples=reps,
        confidence_level=confidence,
        method="percentile",
        vectorized=True,
        paired=False,
        random_state=np.random.default_rng(seed),
    )
    return res.confidence_interval.low, res.confidence_interval.high


def aggregates(scores: Dict[str, Sequence[float]], reps: int = REPS, confidence: float = 0.95, seed: int = 0) -> Any:
    """Mean, median and IQM of each config's final scores, each with a percentile-bootstrap interval.

    Args:
        scores: Config label -> one final score per run (seed).
        reps: Bootstrap resamples.
        confidence: The intervals' level.
        seed: Seed of the resampling (same seed, same intervals).

    Returns:
        A pandas DataFrame indexed by label: ``runs``, then ``mean``/``mean_lo``/``mean_hi`` and likewise
        ``median`` and ``iqm``.

    Raises:
        ValueError: a config with fewer than 2 runs (no interval can be drawn).
    """
    import pandas as pd

    rows = {}
    for label, values in scores.items():
        x = np.asarray(values, dtype=float)
        if x.ndim != 1 or x.size < 2:
            raise ValueError(f"scores[{label!r}] needs at least 2 runs for an interval, got {x.size}")
        row: Dict[str, float] = {"runs": x.size}
        for name, fn in ESTIMATORS.items():
            lo, hi = _bootstrap((x,), lambda s, axis, fn=fn: fn(s, axis=axis), reps, confidence, seed)
            row.update({name: float(fn(x)), f"{name}_lo": float(lo), f"{name}_hi": float(hi)})
        rows[label] = row
    return pd.DataFrame.from_dict(rows, orient="index")


def probability_of_improvement(
    x: Sequence[float], y: Sequence[float], reps: int = REPS, confidence: float = 0.95, seed: int = 0
) -> Dict[str, float]:
    """P(a run of X scores above a run of Y), ties counting half, with a bootstrap interval.

    Returns:
        ``{"p": ..., "lo": ..., "hi": ...}``.
    """
    from scipy.stats import mannwhitneyu

    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 2 or b.size < 2:
        raise ValueError(f"probability_of_improvement needs at least 2 runs each, got {a.size} and {b.size}")

    def statistic(s: np.ndarray, t: np.ndarray, axis: int) -> np.ndarray:
        return mannwhitneyu(s, t, axis=axis).statistic / (s.shape[axis] * t.shape[axis])

    lo, hi = _bootstrap((a, b), statistic, reps, confidence, seed)
    return {"p": float(statistic(a, b, axis=0)), "lo": float(lo), "hi": float(hi)}


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


def curve_band(
    exp: Any,
    metric: Optional[str] = None,
    points: int = 50,
    reps: int = REPS,
    confidence: float = 0.95,
    seed: int = 0,
) -> Any:
    """Each config's mean ``metric`` against env steps with a bootstrap band over its runs.

    Every run's curve is interpolated onto a common grid of ``points`` env-step values (up to the
    shortest run of that config).

    Returns:
        A pandas DataFrame with ``config``, ``env_steps``, ``mean``, ``lo``, ``hi``, ``runs``.
    """
    import pandas as pd

    metric = metric or exp.spec.metric
    runs: Dict[str, list] = {}
    for entry in exp.trials().values():
        pts = [(r["env_steps"], r[metric]) for r in entry["rows"] if isinstance(r.get(metric), (int, float))]
        if len(pts) >= 2:
            runs.setdefault(_label(entry["params"]), []).append(np.asarray(pts, dtype=float))
    frames = []
    for label, curves in runs.items():
        if len(curves) < 2:
            continue
        start = max(c[0, 0] for c in curves)
        end = min(c[-1, 0] for c in curves)
        grid = np.linspace(start, end, points)
        ys = np.stack([np.interp(grid, c[:, 0], c[:, 1]) for c in curves])
        lo, hi = _bootstrap((ys,), lambda s, axis: np.mean(s, axis=axis), reps, confidence, seed)
        frames.append(
            pd.DataFrame(
                {"config": label, "env_steps": grid, "mean": ys.mean(axis=0), "lo": lo, "hi": hi, "runs": len(curves)}
            )
        )
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
