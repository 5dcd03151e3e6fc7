"""`ExperimentView` (``exp.show()``): a sweep's trials table, curves, hyperparameter view and stop buttons.

The view reads `Experiment` snapshots (``results_df``, ``trials``) and redraws every ``interval``
seconds while the sweep runs; the trials go on in the sweep's own thread, so the kernel stays free.
Curves are one line per trial, or, over seeds, one mean per config with its 95% bootstrap band
(`rlightning.notebook.stats.curve_band`, rliable's).
"""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

from rlightning.widgets._base import esc, html_table, ipywidgets_or_none
from rlightning.widgets.charts import _new_figure, _png, draw_compare


def experiment_state(exp: Any) -> Dict[str, Any]:
    """The table's rows (one per trial, as ``exp.results_df()``) and the sweep's status."""
    df = exp.results_df()
    # As objects first: ``where(..., None)`` on a float column puts NaN back, and a trial that has not
    # reported yet would read "nan" (its last / best metric) instead of a dash.
    rows = df.astype(object).where(df.notna(), None).to_dict("records")
    return {
        "name": exp.name,
        "running": exp.is_running,
        "metric": exp.spec.metric,
        "varied": list(exp.spec.varied),
        "trials": rows,
    }


def draw_bands(band: Any, metric: str, width_px: int = 900, height_px: int = 260) -> Optional[bytes]:
    """PNG: each config's mean ``metric`` against env steps with its confidence band (a `curve_band` frame)."""
    if band is None or not len(band):
        return None
    from rlightning.widgets.charts import _compact

    fig, (ax,) = _new_figure(1, width_px, height_px)
    for label, part in band.groupby("config", sort=False):
        runs = int(part["runs"].iloc[0])
        (line,) = ax.plot(part["env_steps"], part["mean"], lw=1.5, label=f"{label} ({runs} runs)")
        ax.fill_between(part["env_steps"], part["lo"], part["hi"], color=line.get_color(), alpha=0.25, lw=0)
    ax.set_xlabel("env steps", fontsize=8)
    ax.set_ylabel(f"{metric} (mean, 95% CI)", fontsize=8)
    ax.xaxis.set_major_formatter(_compact)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return _png(fig)


def config_points(rows: List[Dict[str, Any]], varied: List[str]) -> List[Dict[str, Any]]:
    """The trials' last metrics grouped by config (their varied values, the seed aside).

    Returns one dict per config that has reported, in the trials' order: its ``params`` (the varied
    values but ``seed``), ``values`` (each of its trials' last metric) and their ``mean``.
    """
    keys = [k for k in varied if k != "seed"]
    groups: Dict[tuple, Dict[str, Any]] = {}
    for r in rows:
        if r.get("last") is None:
            continue  # not reported yet
        params = {k: r.get(k) for k in keys}
        group = groups.setdefault(tuple(repr(params[k]) for k in keys), {"params": params, "values": []})
        group["values"].append(float(r["last"]))
    return [{**g, "mean": sum(g["values"]) / len(g["values"])} for g in groups.values()]


def param_panels(groups: List[Dict[str, Any]], varied: List[str]) -> List[str]:
    """The hyperparameters of the view, one panel each: the numeric varied values but the seed."""
    return [k for k in varied if k != "seed" and any(isinstance(g["params"].get(k), (int, float)) for g in groups)]


def draw_params(rows: List[Dict[str, Any]], varied: List[str], metric: str, width_px: int = 900) -> Optional[bytes]:
    """PNG: each varied hyperparameter against the last ``metric``, one panel each, or None.

    The seed is no hyperparameter: it gets no panel, and a config's trials over seeds are one group
    (its runs as small dots, their mean as a larger marker).
    """
    groups = config_points(rows, varied)
    numeric = param_panels(groups, varied)
    if not numeric:
        return None
    fig, axes = _new_figure(len(numeric), width_px, 240)
    for ax, key in zip(axes, numeric):
        pts = [g for g in groups if isinstance(g["params"].get(key), (int, float))]
        xs = [g["params"][key] for g in pts]
        runs = [(g["params"][key], v) for g in pts for v in g["values"]]
        ax.scatter([x for x, _ in runs], [v for _, v in runs], s=10, alpha=0.4, color="tab:blue", label="runs")
        if any(len(g["values"]) > 1 for g in pts):
            ax.scatter(xs, [g["mean"] for g in pts], s=40, marker="D", color="tab:orange", label="config mean")
            ax.legend(fontsize=7, loc="best")
        if key.endswith("lr") and all(x > 0 for x in xs):
            ax.set_xscale("log")
        ax.set_xlabel(key, fontsize=8)
        ax.set_ylabel(f"last {metric}", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    return _png(fig)


class ExperimentView:
    """Trials table, curves per trial, hyperparameter view, Stop-trial and Stop-sweep buttons.

    Args:
        exp: The `Experiment`.
        interval: Seconds between redraws while the sweep runs.
        live: Redraw in a background thread while the sweep runs.
        curves: ``"trial"`` (a line per trial), ``"config"`` (a mean per config with its 95% band over
            seeds) or ``"auto"`` (per config when the sweep runs several seeds).
        band_reps: Bootstrap resamples of the bands.
    """

    def __init__(
        self, exp: Any, interval: float = 2.0, live: bool = True, curves: str = "auto", band_reps: int = 300
    ) -> None:
        if curves not in ("auto", "trial", "config"):
            raise ValueError(f"curves must be 'auto', 'trial' or 'config', got {curves!r}")
        self.exp = exp
        self.interval = interval
        self.by_config = curves == "config" or (curves == "auto" and len(exp.spec.seeds) > 1)
        self.band_reps = band_reps
        self._band_key: Any = None
        self._band_png: Optional[bytes] = None
        self._displayed_at: Optional[int] = None
        self.state: Dict[str, Any] = {}
        self.curves_png: Optional[bytes] = None
        self.params_png: Optional[bytes] = None
        self._w = ipywidgets_or_none()
        self.widget = None
        if self._w is not None:
            w = self._w
            self.status = w.HTML()
            self.table = w.HTML()
            self.curves = w.Image(format="png", layout=w.Layout(max_width="900px"))
            self.params = w.Image(format="png", layout=w.Layout(max_width="900px"))
            self.trial_picker = w.Dropdown(description="trial", options=[])
            self.stop_trial_button = w.Button(description="Stop trial", button_style="warning")
            self.stop_button = w.Button(description="Stop sweep", button_style="danger")
            self.stop_trial_button.on_click(lambda _: self.stop_trial(self.trial_picker.value))
            self.stop_button.on_click(lambda _: self.stop_sweep())
            buttons = w.HBox([self.trial_picker, self.stop_trial_button, self.stop_button])
            self.widget = w.VBox(
                [self.status, buttons, self.table, self.curves, self.params], _dom_classes=["rlightning-experiment"]
            )
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.refresh()
        if live:
            self._thread = threading.Thread(target=self._loop, name="rlightning-experiment-view", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            running = self.exp.is_running
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - a view never breaks a sweep
                pass
            if not running:
                return

    def refresh(self) -> Dict[str, Any]:
        """Redraw from the experiment's snapshot; returns the state."""
        self.state = experiment_state(self.exp)
        rows = self.state["trials"]
        self.curves_png = self._draw_bands() if self.by_config else None
        if self.curves_png is None:  # per trial (also until a config has two runs to band)
            runs = [(t, list(c.to_dict("records"))) for t, c in self.exp.curves().items() if len(c)]
            self.curves_png = draw_compare(runs, keys=((self.state["metric"], "env_steps"),)) if runs else None
        self.params_png = draw_params(rows, self.state["varied"], self.state["metric"])
        if self.widget is not None:
            self.status.value = self._status_html()
            self.table.value = self._table_html()
            if self.curves_png is not None:
                self.curves.value = self.curves_png
            if self.params_png is not None:
                self.params.value = self.params_png
            running = [r["trial_id"] for r in rows if r["status"] in ("RUNNING", "PENDING")]
            self._set_picker(running)
            self.stop_button.disabled = not self.state["running"]
            self.stop_trial_button.disabled = not running
        return self.state

    def _set_picker(self, running: List[str]) -> None:
        """The Stop-trial dropdown: the running trials, one of them selected (the same one while it runs).

        ipywidgets leaves a dropdown whose options go from none to some with no value (it shows blank,
        and Stop trial would stop nothing), so the selection is set here.
        """
        picker = self.trial_picker
        keep = picker.value if picker.value in running else (running[0] if running else None)
        if list(picker.options) != running:
            picker.options = running
        if picker.value != keep:
            picker.value = keep

    def _draw_bands(self) -> Optional[bytes]:
        """The per-config band chart, redrawn only when trials reported new rows."""
        from rlightning.notebook.stats import curve_band

        key = tuple((r["trial_id"], r["iterations"]) for r in self.state["trials"])
        if key != self._band_key:
            self._band_key = key
            band = curve_band(self.exp, points=40, reps=self.band_reps)
            self._band_png = draw_bands(band, self.state["metric"])
        return self._band_png

    def stop_trial(self, trial_id: Optional[str]) -> None:
        """Stop one trial after its current iteration (the Stop-trial button)."""
        if trial_id:
            self.exp.stop_trial(trial_id)

    def stop_sweep(self) -> None:
        """Stop every trial after its current iteration (the Stop-sweep button); returns at once."""
        self.exp.request_stop()

    def _status_html(self) -> str:
        s = self.state
        counts: Dict[str, int] = {}
        for r in s["trials"]:
            counts[r["status"]] = counts.get(r["status"], 0) + 1
        summary = ", ".join(f"{n} {k.lower()}" for k, n in counts.items()) or "no trials yet"
        return f"<b>sweep {esc(s['name'])}</b>: {'running' if s['running'] else 'finished'}; {esc(summary)}"

    def _table_html(self) -> str:
        from rlightning.widgets.panel import num

        varied = self.state["varied"]
        headers = ["trial", "status", *varied, "iterations", "env steps", "last", "best", "error"]
        rows = [
            [r["trial_id"], r["status"], *[r.get(k) for k in varied], r["iterations"], num(r["env_steps"]),
             num(r["last"]), num(r["best"]), r["error"] or ""]
            for r in self.state["trials"]
        ]  # fmt: skip
        return html_table(headers, rows)

    def close(self) -> None:
        """Stop redrawing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def display(self) -> None:
        """Show the view in the notebook."""
        from IPython import get_ipython
        from IPython.display import HTML, display

        shell = get_ipython()
        self._displayed_at = getattr(shell, "execution_count", None) if shell is not None else None
        if self.widget is not None:
            display(self.widget)
        else:
            display(HTML(self._repr_html_()))

    def _ipython_display_(self) -> None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and self._displayed_at is not None and shell.execution_count == self._displayed_at:
            return  # exp.show() already displayed it in this cell
        self.display()

    def _repr_html_(self) -> str:
        import base64

        imgs = "".join(
            f"<img src='data:image/png;base64,{base64.b64encode(p).decode()}'/>"
            for p in (self.curves_png, self.params_png)
            if p
        )
        return f"<div class='rlightning-experiment'>{self._status_html()}{self._table_html()}{imgs}</div>"
