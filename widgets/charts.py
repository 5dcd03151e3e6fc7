"""Charts of a run's metrics, drawn with matplotlib (Agg) into PNG bytes for an ``ipywidgets.Image``.

No pyplot state is touched and no interactive backend is needed: each redraw builds a `Figure`,
renders it and returns the bytes, so the picture updates wherever the Image widget is shown.
"""

from __future__ import annotations

import io
import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

#: The charts of the panel: (title, x key, ((y key, label), ...)); a second y key goes on a right axis.
CHARTS: Tuple[Tuple[str, str, Tuple[Tuple[str, str], ...]], ...] = (
    ("mean episode return", "env_steps", (("episode_return_mean", "return"),)),
    (
        "losses",
        "iteration",
        (("policy_loss", "policy"), ("actor_loss", "actor"), ("value_loss", "value"), ("q_loss", "q")),
    ),
    ("entropy / KL", "iteration", (("entropy", "entropy"), ("approx_kl", "approx KL"), ("alpha", "alpha"))),
    ("throughput", "iteration", (("steps_per_sec_windowed", "env steps / s"),)),
)

#: Iterations the throughput is averaged over (busy time only, so idle gaps and bursts do not show).
RATE_WINDOW = 5


def smooth(values: Sequence[float], window: int) -> List[float]:
    """Trailing moving average over ``window`` points (the first points average what exists)."""
    out: List[float] = []
    total = 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def windowed_rates(history: Sequence[Dict[str, Any]], window: int = RATE_WINDOW) -> List[Optional[float]]:
    """Env steps per second of busy time over the last ``window`` iterations, per iteration.

    Time between iterations (the run idle between ``run.step()`` calls) is not counted, and one
    fast iteration cannot spike the rate: it is steps over seconds summed across the window.
    """
    rates: List[Optional[float]] = []
    for i in range(len(history)):
        rows = history[max(0, i - window + 1) : i + 1]
        steps = sum(float(r.get("rollout_env_steps") or 0.0) for r in rows)
        seconds = sum(float(r.get("iteration_time") or 0.0) for r in rows)
        rates.append(steps / seconds if seconds > 0 and steps > 0 else None)
    return rates


def with_rates(history: Sequence[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Copies of the rows with ``steps_per_sec_windowed`` added."""
    return [{**row, "steps_per_sec_windowed": rate} for row, rate in zip(history, windowed_rates(history))]


def _xy(history: Sequence[Dict[str, Any]], xkey: str, ykey: str) -> Tuple[List[float], List[float]]:
    xs, ys = [], []
    for i, row in enumerate(history):
        y = row.get(ykey)
        if isinstance(y, (int, float)) and not isinstance(y, bool) and math.isfinite(y):
            x = row.get(xkey, i + 1)
            xs.append(float(x if isinstance(x, (int, float)) else i + 1))
            ys.append(float(y))
    return xs, ys


def smoothing_window(n: int) -> int:
    """A smoothing window that grows with the number of points (1 for a handful)."""
    return max(1, min(25, n // 10))


def chart_series(history: Sequence[Dict[str, Any]]) -> Dict[str, Dict[str, Tuple[List[float], List[float]]]]:
    """For each chart title, the (x, y) series it draws (only keys with data): the charts' state."""
    rows = with_rates(history)
    out: Dict[str, Dict[str, Tuple[List[float], List[float]]]] = {}
    for title, xkey, keys in CHARTS:
        series = {}
        for key, _ in keys:
            xs, ys = _xy(rows, xkey, key)
            if xs:
                series[key] = (xs, ys)
        if series:
            out[title] = series
    return out


def _new_figure(ncols: int, width_px: int, height_px: int, dpi: int = 80):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_px / dpi, height_px / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def _compact(value: float, _pos: Any = None) -> str:
    """Tick labels that do not run into each other: 12k, 1.5M."""
    a = abs(value)
    if a >= 1e6:
        return f"{value / 1e6:g}M"
    if a >= 1e3:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def _style_x(ax: Any) -> None:
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(nbins=4, integer=True))
    ax.xaxis.set_major_formatter(FuncFormatter(_compact))


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.tight_layout(pad=0.6)
    fig.savefig(buf, format="png")
    return buf.getvalue()


def draw_charts(
    history: Sequence[Dict[str, Any]],
    target_return: Optional[float] = None,
    width_px: int = 1100,
    height_px: int = 230,
) -> Optional[bytes]:
    """PNG of the run's charts (raw values faint, smoothed solid), or None before any metrics."""
    series = chart_series(history)
    if not series:
        return None
    fig, axes = _new_figure(len(series), width_px, height_px)
    labels = {key: label for _, _, keys in CHARTS for key, label in keys}
    xlabels = {title: ("env steps" if xkey == "env_steps" else "iteration") for title, xkey, _ in CHARTS}
    colors = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
    for ax, (title, lines) in zip(axes, series.items()):
        handles = []
        target_ax = ax
        for j, (key, (xs, ys)) in enumerate(lines.items()):
            if j == 1:  # a second series of a different scale (value loss beside policy loss) gets its own axis
                target_ax = ax.twinx()
            color = colors[j % len(colors)]
            if len(ys) > 3:
                target_ax.plot(xs, ys, color=color, alpha=0.25, linewidth=1)
            (line,) = target_ax.plot(xs, smooth(ys, smoothing_window(len(ys))), color=color, linewidth=1.6)
            line.set_label(labels.get(key, key))
            handles.append(line)
            target_ax.tick_params(axis="y", labelsize=7, colors=color if len(lines) > 1 else "black")
        if title == "mean episode return" and target_return is not None:
            ax.axhline(target_return, color="gray", linestyle="--", linewidth=1)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(xlabels[title], fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        _style_x(ax)
        ax.grid(alpha=0.3)
        if len(handles) > 1:
            ax.legend(handles=handles, fontsize=7, loc="best", framealpha=0.6)
    return _png(fig)


def draw_compare(
    runs: Sequence[Tuple[str, Sequence[Dict[str, Any]]]],
    keys: Sequence[Tuple[str, str]] = (("episode_return_mean", "env_steps"), ("steps_per_sec_windowed", "iteration")),
    width_px: int = 900,
    height_px: int = 260,
) -> Optional[bytes]:
    """PNG overlaying several runs (one line per run) for each ``(metric, x key)``, or None without data."""
    present = []
    for key, xkey in keys:
        if any(_xy(with_rates(h), xkey, key)[0] for _, h in runs):
            present.append((key, xkey))
    if not present:
        return None
    fig, axes = _new_figure(len(present), width_px, height_px)
    for ax, (key, xkey) in zip(axes, present):
        for name, history in runs:
            xs, ys = _xy(with_rates(history), xkey, key)
            if xs:
                ax.plot(xs, smooth(ys, smoothing_window(len(ys))), linewidth=1.6, label=name)
        ax.set_title(key.replace("_", " "), fontsize=9)
        ax.set_xlabel(xkey.replace("_", " "), fontsize=8)
        ax.tick_params(labelsize=7)
        _style_x(ax)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="best", framealpha=0.6)
    return _png(fig)
