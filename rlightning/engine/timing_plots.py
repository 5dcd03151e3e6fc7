"""matplotlib views of `Timing` records (imported only when a plot is asked for)."""

from __future__ import annotations

from typing import Any, Optional

from rlightning.engine.timing import LATENCIES, PHASES, Timing

_INSTALL_HINT = "timing plots need matplotlib: pip install 'rlightning[notebook]'"


def _pyplot():
    try:
        import matplotlib

        if matplotlib.get_backend().lower() in ("", "agg") or not _interactive():
            matplotlib.use("Agg", force=False)
        import matplotlib.pyplot as plt
    except ImportError as err:
        raise ImportError(_INSTALL_HINT) from err
    return plt


def _interactive() -> bool:
    try:
        from IPython import get_ipython

        return get_ipython() is not None
    except ImportError:
        return False


def _figure(ax: Optional[Any], size=(7, 3.5)):
    plt = _pyplot()
    if ax is None:
        fig, ax = plt.subplots(figsize=size)
        plt.close(fig)  # returned, shown once by the notebook, not twice
    else:
        fig = ax.figure
    return fig, ax


def plot_phases(timing: Timing, ax: Optional[Any] = None):
    """Stacked bars: seconds per phase for each iteration."""
    fig, ax = _figure(ax)
    records = timing.table()
    iters = [int(r.get("iteration", i)) for i, r in enumerate(records)]
    bottom = [0.0] * len(records)
    for phase in PHASES:
        values = [r.get(phase, 0.0) for r in records]
        if not any(values):
            continue
        ax.bar(iters, values, bottom=bottom, label=phase, width=0.85)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xlabel("iteration")
    ax.set_ylabel("seconds")
    ax.set_title("time per phase")
    if records:  # beside the bars, not over them
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    fig.tight_layout()
    return fig


def plot_latency(timing: Timing, ax: Optional[Any] = None):
    """Histograms of transfer latencies in milliseconds."""
    fig, ax = _figure(ax)
    for kind in LATENCIES:
        samples = [s * 1e3 for s in timing.latencies[kind]]
        if samples:
            ax.hist(samples, bins=40, alpha=0.6, label=kind.replace("_", " "))
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("count")
    ax.set_title("transfer latencies")
    if any(timing.latencies[k] for k in LATENCIES):
        ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


def throughput_points(timing: Timing) -> tuple:
    """(wall times, env steps/s) per iteration, with None between iterations separated by idle time.

    An iteration's rate is its env steps over its own phase time; the line is broken where the run
    sat idle (between ``run.step()`` calls, or before a later ``run.run()``), so no line is drawn
    across time in which nothing ran.
    """
    xs: list = []
    ys: list = []
    prev_end = None
    for r in timing.table():
        seconds = sum(r.get(p, 0.0) for p in PHASES)
        if seconds <= 0 or not r.get("env_steps"):
            continue
        start = r["t_end"] - seconds
        if prev_end is not None and start - prev_end > max(1.0, 2.0 * seconds):
            xs.append(None)
            ys.append(None)
        xs.append(r["t_end"])
        ys.append(r["env_steps"] / seconds)
        prev_end = r["t_end"]
    return xs, ys


def plot_throughput(timing: Timing, ax: Optional[Any] = None):
    """Env steps per second of each iteration against wall time (broken across idle time)."""
    fig, ax = _figure(ax)
    xs, ys = throughput_points(timing)
    nan = float("nan")
    ax.plot([nan if x is None else x for x in xs], [nan if y is None else y for y in ys], marker="o", markersize=3)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("env steps / s")
    ax.set_title("throughput (gaps: the run was idle)")
    fig.tight_layout()
    return fig
