"""The progress line of ``run.run()``: iterations of the run (as the panel counts them) and how it ended."""

from __future__ import annotations

from typing import Any

from rlightning.widgets._base import ipywidgets_or_none

#: ipywidgets bar style per run state: a finished run is green, a stopped or paused one blue, a failure red.
BAR_STYLE = {"done": "success", "stopped": "info", "paused": "info", "failed": "danger", "running": ""}


def in_notebook() -> bool:
    """True inside a Jupyter kernel (a shell that can show widgets)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


_BOX: dict = {}


def _progress_box(w: Any) -> type:
    """An HBox whose plain-text form (a saved notebook without widget state) is the progress line."""
    if id(w) not in _BOX:

        class ProgressBox(w.HBox):
            def __repr__(self) -> str:
                bar, label = self.children
                return f"iteration {label.value}"

        _BOX[id(w)] = ProgressBox
    return _BOX[id(w)]


class WidgetProgress:
    """An ``IntProgress`` from the goal's first to its last iteration, with the run's status beside it."""

    def __init__(self, run: Any, w: Any) -> None:
        self.run = run
        first, last = run.goal
        self.bar = w.IntProgress(min=first, max=max(last, first + 1), value=first, description="iteration")
        self.label = w.HTML()
        self.box = _progress_box(w)([self.bar, self.label], _dom_classes=["rlightning-progress"])
        self.update()
        from IPython.display import display

        display(self.box)

    def update(self) -> None:
        """Show the run's iteration and status."""
        it = self.run.engine.iteration
        self.bar.value = min(max(it, self.bar.min), self.bar.max)
        last = self.run.metrics[-1] if self.run.metrics else {}
        ret = last.get("episode_return_mean")
        extra = f" · return {ret:.1f}" if isinstance(ret, (int, float)) else ""
        self.label.value = f"{it}/{self.bar.max}{extra} · {self.run.status['message']}"
        self.bar.bar_style = BAR_STYLE.get(self.run.status["state"], "")

    def close(self) -> None:
        """Final state: the stop reason and a bar style that is not red unless the run failed."""
        self.update()


class TextProgress:
    """A tqdm bar counting the run's iterations, for scripts and terminals."""

    def __init__(self, run: Any) -> None:
        from tqdm import tqdm

        self.run = run
        first, last = run.goal
        self.bar = tqdm(total=last, initial=first, desc=f"{run.name}", unit="it", leave=True)

    def update(self) -> None:
        """Advance to the run's iteration."""
        self.bar.update(self.run.engine.iteration - self.bar.n)

    def close(self) -> None:
        """Write the stop reason and close the bar."""
        self.update()
        self.bar.set_postfix_str(self.run.status["message"], refresh=False)
        self.bar.close()


def progress_for(run: Any) -> Any:
    """A widget progress line in a notebook with ipywidgets, a tqdm bar elsewhere."""
    w = ipywidgets_or_none()
    if w is not None and in_notebook():
        return WidgetProgress(run, w)
    return TextProgress(run)
