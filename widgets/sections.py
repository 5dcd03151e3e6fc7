"""The control panel's sections: one class each, registered by name, shown in registration order.

A section is a collapsible view of the control panel (``run.show()``): a widget body built once, a state
recomputed at each refresh from the run's public state, and a static HTML form for saved notebooks. A new
view is one file::

    from rlightning.widgets.sections import PanelSection, register_section

    @register_section("losses")
    class LossesSection(PanelSection):
        def refresh(self):
            last = self.run.metrics[-1] if self.run.metrics else {}
            self.losses = {k: v for k, v in last.items() if k.endswith("_loss")}
            return bool(self.losses)          # shown only with something to show

        def build(self, w):
            self.body = w.HTML()
            return self.body

        def update(self):
            self.body.value = self.render_html()

        def render_html(self):
            return html_table(["loss", "value"], [[k, num(v)] for k, v in self.losses.items()])

Importing the file registers the section; every panel opened afterwards shows it.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Type

from rlightning.widgets._base import esc, html_table

__all__ = ["PanelSection", "SECTIONS", "num", "register_section", "section_classes"]

#: Registered section classes by name, in the order the panel shows them.
SECTIONS: Dict[str, Type[PanelSection]] = {}


def register_section(name: str) -> Callable[[Type[PanelSection]], Type[PanelSection]]:
    """Class decorator: register a `PanelSection` subclass under ``name`` (re-registering replaces it in place).

    Raises:
        TypeError: the class is not a `PanelSection`.
    """

    def add(cls: Type[PanelSection]) -> Type[PanelSection]:
        if not (isinstance(cls, type) and issubclass(cls, PanelSection)):
            raise TypeError(f"register_section({name!r}) takes a PanelSection subclass, got {cls!r}")
        cls.name = name
        SECTIONS[name] = cls
        return cls

    return add


def section_classes() -> List[Type[PanelSection]]:
    """The registered sections, in order."""
    return list(SECTIONS.values())


def num(value: Any) -> str:
    """A number for people: ints with thousands separators, floats to 3 significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or float(value).is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


class PanelSection:
    """One section of the control panel over a `Run`.

    Subclasses implement `refresh` (recompute from the run; return whether the section has something to
    show), `build` (the ipywidgets body), `update` (push the refreshed state into the body) and
    `render_html` (the static form).

    Args:
        run: The notebook `Run` the panel drives.

    Attributes:
        state: The panel's state of the current refresh (``panel_state``), set before each `refresh`.
    """

    name = ""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.state: Dict[str, Any] = {}

    def refresh(self) -> bool:
        """Recompute this section's view from the run (and ``self.state``, the panel's); True to show it."""
        raise NotImplementedError

    def build(self, w: Any) -> Any:
        """The section's body widget (``w`` is the ipywidgets module)."""
        raise NotImplementedError

    def update(self) -> None:
        """Show the last `refresh` in the body `build` made."""
        raise NotImplementedError

    def render_html(self) -> str:
        """The section as static HTML."""
        raise NotImplementedError


class _HTMLSection(PanelSection):
    """A section whose body is its `render_html` in one HTML widget."""

    def build(self, w: Any) -> Any:
        self.body = w.HTML()
        return self.body

    def update(self) -> None:
        self.body.value = self.render_html()


@register_section("buffer")
class BufferSection(PanelSection):
    """What the data buffer holds (`BufferViewWidget`)."""

    def __init__(self, run: Any) -> None:
        super().__init__(run)
        from rlightning.widgets.buffer_view import BufferViewWidget

        self.view = BufferViewWidget(run.engine.buffer)

    def refresh(self) -> bool:
        return self.view.refresh()["transitions_written"] > 0

    def build(self, w: Any) -> Any:
        return self.view.widget

    def update(self) -> None:  # the view's widget updates itself on refresh
        pass

    def render_html(self) -> str:
        return self.view.render_html(self.view.state)


@register_section("episodes")
class EpisodesSection(_HTMLSection):
    """The newest finished episodes: env, return, length."""

    def refresh(self) -> bool:
        return bool(self.state.get("recent_episodes"))

    def render_html(self) -> str:
        recent = self.state.get("recent_episodes", [])
        rows = [[e.get("env_id", "-"), num(e.get("return")), num(e.get("length"))] for e in reversed(recent)]
        return f"<div class='rl-episodes'>{html_table(['env', 'return', 'length'], rows)}</div>"


@register_section("timing")
class TimingSection(_HTMLSection):
    """Mean time per iteration of each phase."""

    def refresh(self) -> bool:
        return bool(self.state.get("timing"))

    def render_html(self) -> str:
        rows = [[k, f"{v * 1e3:,.1f} ms"] for k, v in self.state.get("timing", {}).items()]
        return f"<div class='rl-timing'>{html_table(['phase', 'mean per iteration'], rows)}</div>"


@register_section("workers")
class WorkersSection(PanelSection):
    """Restart and error counts of the workers, and the episode table (which env feeds which shard)."""

    def __init__(self, run: Any) -> None:
        super().__init__(run)
        from rlightning.widgets.episode_table import EpisodeTableWidget

        self.table = EpisodeTableWidget(run.engine.buffer)

    def refresh(self) -> bool:
        self.table.refresh()
        return True

    def _counts_html(self) -> str:
        workers = self.state.get("workers", {})
        rows = [[k.replace("_", " "), num(v) if not isinstance(v, dict) else esc(v)] for k, v in workers.items()]
        return f"<div class='rl-workers'>{html_table(['', 'count'], rows)}</div>"

    def build(self, w: Any) -> Any:
        self.counts = w.HTML()
        return w.VBox([self.counts, self.table.widget])

    def update(self) -> None:
        self.counts.value = self._counts_html()

    def render_html(self) -> str:
        return self.table.render_html(self.table.state)
