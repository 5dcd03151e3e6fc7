"""Shared pieces of the views: optional ipywidgets, HTML helpers, sparklines, live refresh."""

from __future__ import annotations

import html
import threading
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

INSTALL_HINT = "interactive widgets need ipywidgets: pip install 'rlightning[notebook]'"


def ipywidgets_or_none():
    """The ipywidgets module, or None when it is not installed."""
    try:
        import ipywidgets
    except ImportError:
        return None
    return ipywidgets


def esc(value: Any) -> str:
    """HTML-escape ``str(value)``."""
    return html.escape(str(value))


def fmt(value: Any, digits: int = 1) -> str:
    """A number formatted for a table cell (``-`` for None)."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def html_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], css_class: str = "") -> str:
    """A small HTML table."""
    head = "".join(f"<th style='text-align:left;padding:0 8px'>{esc(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left;padding:0 8px'>{esc(c)}</td>" for c in row) + "</tr>"
        for row in rows
    )
    return f"<table class='{esc(css_class)}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def sparkline(values: Sequence[float], width: int = 160, height: int = 32, label: str = "") -> str:
    """An inline SVG sparkline of ``values`` with its label and last value."""
    vals = [float(v) for v in values if v is not None]
    last = fmt(vals[-1], 2) if vals else "-"
    if len(vals) < 2:
        points = ""
    else:
        lo, hi = min(vals), max(vals)
        span = (hi - lo) or 1.0
        step = width / (len(vals) - 1)
        points = " ".join(
            f"{i * step:.1f},{height - (v - lo) / span * (height - 2) - 1:.1f}" for i, v in enumerate(vals)
        )
    return (
        f"<div class='rl-spark' data-label='{esc(label)}' style='display:inline-block;margin-right:12px'>"
        f"<div style='font-size:11px'>{esc(label)}: <b>{esc(last)}</b></div>"
        f"<svg width='{width}' height='{height}'><polyline fill='none' stroke='#1f77b4' stroke-width='1.5' "
        f"points='{points}'/></svg></div>"
    )


class LiveView:
    """Base of the views: a ``state`` dict computed from the core, rendered as HTML or widgets.

    Subclasses implement ``compute_state()`` and ``render_html(state)``.
    """

    def __init__(self) -> None:
        self.state: Dict[str, Any] = {}
        self._w = ipywidgets_or_none()
        self.widget = self._w.HTML() if self._w is not None else None
        self._watcher: Optional[threading.Thread] = None
        self._stop = threading.Event()
        self.refresh_count = 0

    def compute_state(self) -> Dict[str, Any]:  # pragma: no cover - abstract
        raise NotImplementedError

    def render_html(self, state: Dict[str, Any]) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def refresh(self) -> Dict[str, Any]:
        """Recompute the state from the core and update the widget; returns the state."""
        self.state = self.compute_state()
        self.refresh_count += 1
        if self.widget is not None:
            self.widget.value = self.render_html(self.state)
        return self.state

    def watch(self, interval: float = 0.5, while_: Optional[Callable[[], bool]] = None) -> None:
        """Refresh every ``interval`` seconds in a background thread (until ``unwatch`` or ``while_`` is False)."""
        self.unwatch()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(interval):
                if while_ is not None and not while_():
                    self.refresh()
                    break
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - a view never breaks a run
                    pass

        self._watcher = threading.Thread(target=loop, name=f"rlightning-{type(self).__name__}", daemon=True)
        self._watcher.start()

    def unwatch(self) -> None:
        """Stop the background refresh."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        self.refresh()
        if self.widget is not None:
            display(self.widget)
        else:
            display(HTML(self.render_html(self.state) + f"<p><i>{esc(INSTALL_HINT)}</i></p>"))

    def _repr_html_(self) -> str:
        self.refresh()
        return self.render_html(self.state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({list(self.state)})"


def rows_of(records: List[Dict[str, Any]], keys: Sequence[str]) -> List[List[Any]]:
    """Rows of ``keys`` from a list of dicts, formatted for tables."""
    return [[fmt(r.get(k)) for k in keys] for r in records]
