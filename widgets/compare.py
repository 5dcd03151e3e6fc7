"""`CompareView` (``lab.compare(run_a, run_b, ...)``): several runs' curves overlaid, live while any runs."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional, Sequence

from rlightning.widgets._base import esc, html_table, ipywidgets_or_none
from rlightning.widgets.charts import draw_compare, windowed_rates


def compare_state(runs: Sequence[Any]) -> Dict[str, Any]:
    """One row per run: name, iteration, env steps, last return, throughput, status."""
    rows = []
    for run in runs:
        history = list(run.metrics)
        rates = windowed_rates(history)
        last = history[-1] if history else {}
        rows.append(
            {
                "name": run.name,
                "iteration": run.engine.iteration,
                "env_steps": run.engine.env_steps,
                "return": last.get("episode_return_mean"),
                "steps_per_sec": rates[-1] if rates else None,
                "status": run.status["message"],
            }
        )
    return {"runs": rows}


class CompareView:
    """Return against env steps and throughput of several runs, one line per run.

    Args:
        runs: The `Run` objects (at least one; names must differ to tell the lines apart).
        interval: Seconds between redraws while any of the runs is going.
    """

    def __init__(self, runs: Sequence[Any], interval: float = 2.0, live: bool = True) -> None:
        if not runs:
            raise ValueError("compare() needs at least one run, e.g. lab.compare(run_a, run_b)")
        missing = [type(r).__name__ for r in runs if not hasattr(r, "metrics") or not hasattr(r, "engine")]
        if missing:
            raise TypeError(f"compare() takes Run objects (from lab.build), got {', '.join(missing)}")
        self.runs = list(runs)
        self.interval = interval
        self.state: Dict[str, Any] = {}
        self.png: Optional[bytes] = None
        self._w = ipywidgets_or_none()
        self.widget = None
        if self._w is not None:
            self.image = self._w.Image(format="png", layout=self._w.Layout(max_width="900px"))
            self.table = self._w.HTML()
            self.widget = self._w.VBox([self.image, self.table], _dom_classes=["rlightning-compare"])
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.refresh()
        if live:
            self._thread = threading.Thread(target=self._loop, name="rlightning-compare", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            if any(r.is_running for r in self.runs):
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - a view never breaks a run
                    pass

    def refresh(self) -> Dict[str, Any]:
        """Redraw from the runs' metrics; returns the state."""
        self.state = compare_state(self.runs)
        self.png = draw_compare([(r.name, list(r.metrics)) for r in self.runs])
        if self.widget is not None:
            if self.png is not None:
                self.image.value = self.png
            self.table.value = self._table_html()
        return self.state

    def _table_html(self) -> str:
        from rlightning.widgets.panel import num

        rows: List[List[Any]] = [
            [r["name"], r["iteration"], num(r["env_steps"]), num(r["return"]), num(r["steps_per_sec"]), r["status"]]
            for r in self.state["runs"]
        ]
        return html_table(["run", "iteration", "env steps", "return", "env steps/s", "status"], rows)

    def close(self) -> None:
        """Stop redrawing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        if self.widget is not None:
            display(self.widget)
        else:
            display(HTML(self._repr_html_()))

    def _repr_html_(self) -> str:
        import base64

        img = f"<img src='data:image/png;base64,{base64.b64encode(self.png).decode()}'/>" if self.png else ""
        return f"<div class='rlightning-compare'>{img}{self._table_html()}</div><i>{esc('')}</i>"
