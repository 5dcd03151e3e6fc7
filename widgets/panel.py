"""`ControlPanel` (``run.show()``): buttons that drive a `Run`, its status, live charts and sections.

Every control calls a public `Run` method (``start``, ``pause``, ``resume``, ``stop``, ``set``);
a run started here goes to the run's background thread, so the kernel stays free. The state the
panel shows is in ``panel.state`` (and the widgets' traits), so tests check it without a browser.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, Optional

from rlightning.widgets._base import INSTALL_HINT, esc, ipywidgets_or_none
from rlightning.widgets.charts import draw_charts, windowed_rates
from rlightning.widgets.dashboard import engine_state
from rlightning.widgets.progress import BAR_STYLE
from rlightning.widgets.sections import num, section_classes

#: Hyperparameter fields the panel offers, when the run can set them.
PANEL_FIELDS = ("lr", "ent_coef", "clip_coef", "q_lr", "tau", "alpha")
__all__ = ["ControlPanel", "PANEL_FIELDS", "num", "panel_state"]


def panel_state(run: Any) -> Dict[str, Any]:
    """What the panel shows, from the run's public state: status, counters, rates, sections."""
    engine = run.engine
    eng = engine_state(engine)
    history = list(run.metrics)
    rates = windowed_rates(history)
    last = history[-1] if history else {}
    timing = {k: v for k, v in eng["timing"].items() if isinstance(v, float)}
    recent = []
    try:
        recent = list(engine.buffer.stats().get("recent_episodes", []))[-8:]
    except Exception:  # noqa: BLE001 - display only
        recent = []
    workers = {k: v for k, v in eng["restarts"].items()}
    if "env_errors" in eng:  # the env error counts (h5), when the engine reports them
        workers["env_errors"] = eng["env_errors"]
    return {
        "name": run.name,
        "state": run.status["state"],
        "status": run.status["message"],
        "iteration": eng["iteration"],
        "goal": tuple(run.goal),
        "env_steps": eng["env_steps"],
        "episodes": eng["episodes"],
        "phase": eng["phase"],
        "return": last.get("episode_return_mean"),
        "steps_per_sec": rates[-1] if rates else None,
        "hyperparameters": dict(run.hyperparameters),
        "timing": timing,
        "recent_episodes": recent,
        "workers": workers,
        "running": run.is_running,
    }


_BOX: Dict[int, type] = {}


def _panel_box(w: Any) -> type:
    """A VBox whose plain-text form (a saved notebook without widget state) is one readable line."""
    if id(w) not in _BOX:

        class PanelBox(w.VBox):
            panel_name = ""

            def __repr__(self) -> str:
                return f"rlightning control panel of run {self.panel_name!r} (live while its kernel runs)"

        _BOX[id(w)] = PanelBox
    return _BOX[id(w)]


class ControlPanel:
    """Controls and live views of one `Run`.

    Args:
        run: The notebook `Run`.
        interval: Seconds between refreshes while the panel is open.
        chart_interval: Least seconds between two chart redraws (drawing costs CPU).
        live: Refresh in a background thread (False: only on ``refresh()``).
    """

    def __init__(self, run: Any, interval: float = 0.5, chart_interval: float = 2.0, live: bool = True) -> None:
        self.run = run
        self.interval = interval
        self.chart_interval = chart_interval
        self.state: Dict[str, Any] = {}
        self.chart_png: Optional[bytes] = None
        self.refresh_count = 0
        self._drawn_rows = -1
        self._drawn_at = 0.0
        self._displayed_at: Optional[int] = None
        self._stop = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        self.section_views = {cls.name: cls(run) for cls in section_classes()}
        """The registered sections (`rlightning.widgets.sections`), by name, in order."""
        self._w = ipywidgets_or_none()
        self.container = None
        if self._w is not None:
            self._build_widgets(self._w)
        self.refresh(force_chart=True)
        if live:
            self.watch()

    # ------------------------------------------------------------------ widgets
    def _build_widgets(self, w: Any) -> None:
        lay = w.Layout(width="auto")
        self.header = w.HTML(layout=w.Layout(width="100%"))
        self.progress = w.IntProgress(min=0, max=1, description="iteration", layout=w.Layout(width="420px"))
        self.status_label = w.HTML()
        self.buttons = {
            "step": w.Button(description="Step", tooltip="one iteration, in the background", layout=lay),
            "run": w.Button(description="Run N", tooltip="N iterations in the background", layout=lay),
            "pause": w.Button(description="Pause", tooltip="hold after the current iteration", layout=lay),
            "resume": w.Button(description="Resume", tooltip="go on to the goal", layout=lay),
            "stop": w.Button(description="Stop", tooltip="stop after the current phase", layout=lay),
            "play": w.Button(description="Play episode", tooltip="run.record(episodes=1): a video", layout=lay),
        }
        self.n_field = w.BoundedIntText(value=50, min=1, max=1_000_000, description="N", layout=w.Layout(width="170px"))
        self.n_field.add_class("rl-run-n")
        for name, button in self.buttons.items():
            button.add_class(f"rl-btn-{name}")
            button.on_click(lambda _b, name=name: self.press(name))
        self.fields = {}
        for name in PANEL_FIELDS:
            value = self._current_value(name) if name in self.run.settable else None
            if value is not None:  # unset fields (q_lr: None, meaning lr) are left to run.set
                self.fields[name] = w.FloatText(value=value, description=name, layout=w.Layout(width="170px"))
        self.apply_button = w.Button(description="Apply", tooltip="run.set(...) from the next iteration")
        self.apply_button.add_class("rl-btn-apply")
        self.apply_button.on_click(lambda _b: self.press("apply"))
        self.chart = w.Image(format="png", layout=w.Layout(width="100%", max_width="1100px"))
        self.sections = {}
        for name, section in self.section_views.items():
            acc = w.Accordion(children=[section.build(w)], titles=(name,), selected_index=None)
            acc.add_class(f"rl-section-{name}")
            self.sections[name] = acc
        controls = w.HBox([*self.buttons.values(), self.n_field])
        hp = w.HBox([*self.fields.values(), self.apply_button]) if self.fields else w.HBox([])
        self.player = w.HTML(layout=w.Layout(display="none"))
        self.container = _panel_box(w)(
            [
                self.header,
                w.HBox([self.progress, self.status_label]),
                controls,
                hp,
                self.chart,
                self.player,
                *self.sections.values(),
            ],
            _dom_classes=["rlightning-panel"],
        )
        self.container.panel_name = self.run.name

    def _current_value(self, name: str) -> Optional[float]:
        policy = self.run.config.policy
        value = getattr(policy, name, None) if name in type(policy).model_fields else getattr(policy.optim, name, None)
        return float(value) if isinstance(value, (int, float)) else None

    # ------------------------------------------------------------------ controls
    def press(self, name: str) -> None:
        """What a button does (also callable without widgets): step, run, pause, resume, stop, apply."""
        run = self.run
        try:
            if name == "step":
                run.start(iterations=1)
            elif name == "run":
                run.start(iterations=int(self.n_field.value) if self._w is not None else 50)
            elif name == "pause":
                run.pause()
            elif name == "resume":
                run.resume()
            elif name == "stop":
                run.stop(timeout=0)
            elif name == "play":
                self.play()
            elif name == "apply":
                values = {k: f.value for k, f in self.fields.items() if f.value != self._current_value(k)}
                if values:
                    run.set(**values)
            else:
                raise ValueError(f"unknown control {name!r}; controls: step, run, pause, resume, stop, play, apply")
            self.last_error = None
        except (RuntimeError, ValueError, KeyError, TypeError, ImportError) as err:
            self.last_error = f"{name}: {err}"
        self.refresh()

    last_error: Optional[str] = None
    last_player: Any = None

    def play(self) -> Any:
        """Record one episode with the current policy and show its video in the panel; returns the player."""
        player = self.run.record(episodes=1)
        self.last_player = player
        if self._w is not None:
            self.player.value = player._repr_html_()
            self.player.layout.display = None
        return player

    def button_states(self) -> Dict[str, bool]:
        """Which controls are enabled now."""
        running = self.run.is_running
        closed = self.run.status["state"] == "closed"
        can_resume = not running and not closed and self.run.goal[1] > self.run.engine.iteration
        return {
            "step": not running and not closed,
            "run": not running and not closed,
            "pause": running,
            "resume": can_resume and self.run.status["state"] in ("paused", "stopped"),
            "stop": running,
            "play": not running and not closed,
        }

    # ------------------------------------------------------------------ refresh
    def refresh(self, force_chart: bool = False) -> Dict[str, Any]:
        """Recompute the state from the run and update the widgets; returns the state."""
        s = panel_state(self.run)
        s["buttons"] = self.button_states()
        s["error"] = self.last_error
        for section in self.section_views.values():
            section.state = s
        s["sections"] = {name: bool(section.refresh()) for name, section in self.section_views.items()}
        rows = len(self.run.metrics)
        now = time.monotonic()
        if force_chart or (rows != self._drawn_rows and now - self._drawn_at >= self.chart_interval):
            self.chart_png = draw_charts(self.run.metrics, self.run.config.train.target_return)
            self._drawn_rows, self._drawn_at = rows, now
        s["chart_rows"] = self._drawn_rows
        self.state = s
        self.refresh_count += 1
        if self.container is not None:
            self._update_widgets(s)
        return s

    def _update_widgets(self, s: Dict[str, Any]) -> None:
        first, last = s["goal"]
        self.progress.min = 0
        self.progress.max = max(1, last, s["iteration"])
        self.progress.value = s["iteration"]
        self.progress.bar_style = BAR_STYLE.get(s["state"], "")
        msg = s["status"] if not s["error"] else f"{s['status']} · <b>{esc(s['error'])}</b>"
        badge = "" if s["status"].startswith(s["state"]) else f"{esc(s['state'])}: "
        self.status_label.value = (
            f"<span class='rl-state' data-state='{esc(s['state'])}' style='display:none'>{esc(s['state'])}</span>"
            f"{badge}<span class='rl-status'>{msg}</span>"
        )
        hp = ", ".join(f"{k}={num(v)}" for k, v in s["hyperparameters"].items())
        self.header.value = (
            f"<div class='rlightning-dashboard'><b>{esc(s['name'])}</b> · iteration "
            f"<span class='rl-iteration'>{s['iteration']}</span>/{self.progress.max}"
            f" · env steps <span class='rl-env-steps'>{num(s['env_steps'])}</span>"
            f" · episodes {num(s['episodes'])} · return <span class='rl-return'>{num(s['return'])}</span>"
            f" · <span class='rl-rate'>{num(s['steps_per_sec'])}</span> env steps/s"
            f" · phase <span class='rl-phase'>{esc(s['phase'])}</span>"
            + (f" · set: {esc(hp)}" if hp else "")
            + "</div>"
        )
        for name, enabled in s["buttons"].items():
            self.buttons[name].disabled = not enabled
        self.apply_button.disabled = s["state"] == "closed"
        if self.chart_png is not None and self.chart.value != self.chart_png:
            self.chart.value = self.chart_png
        self.chart.layout.display = None if self.chart_png is not None else "none"
        for section in self.section_views.values():
            section.update()
        for name, visible in s["sections"].items():
            self.sections[name].layout.display = None if visible else "none"

    def watch(self) -> None:
        """Refresh every ``interval`` seconds in a background thread until ``close()``."""
        self.unwatch()
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.refresh()
                except Exception:  # noqa: BLE001 - a view never breaks a run
                    pass

        self._watcher = threading.Thread(target=loop, name="rlightning-panel", daemon=True)
        self._watcher.start()

    def unwatch(self) -> None:
        """Stop the background refresh."""
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
            self._watcher = None

    def close(self) -> None:
        """Stop refreshing (the run goes on)."""
        self.unwatch()

    # ------------------------------------------------------------------ display
    def render_html(self) -> str:
        """A static HTML snapshot (no ipywidgets, or a saved notebook)."""
        s = self.state
        img = ""
        if self.chart_png is not None:
            import base64

            img = f"<img src='data:image/png;base64,{base64.b64encode(self.chart_png).decode()}'/>"
        return (
            f"<div class='rlightning-panel'><div class='rlightning-dashboard'><b>{esc(s['name'])}</b> · iteration "
            f"<span class='rl-iteration'>{s['iteration']}</span>/{s['goal'][1]} · env steps {num(s['env_steps'])}"
            f" · {esc(s['state'])}: <span class='rl-status'>{esc(s['status'])}</span></div>{img}"
            + "".join(section.render_html() for section in self.section_views.values())
            + "</div>"
        )

    def display(self) -> None:
        """Show the panel in the running cell (once: the cell's last expression does not show it again)."""
        from IPython import get_ipython
        from IPython.display import HTML, display

        shell = get_ipython()
        self._displayed_at = getattr(shell, "execution_count", None) if shell is not None else None
        self.refresh()
        if self.container is not None:
            display(self.container)
        else:
            display(HTML(self.render_html() + f"<p><i>{esc(INSTALL_HINT)}</i></p>"))

    def _ipython_display_(self) -> None:
        from IPython import get_ipython

        shell = get_ipython()
        if shell is not None and self._displayed_at is not None and shell.execution_count == self._displayed_at:
            return  # run.show() already displayed it in this cell
        self.display()

    def _repr_html_(self) -> str:
        self.refresh()
        return self.render_html()

    def __repr__(self) -> str:
        s = self.state
        return f"ControlPanel({s.get('name')!r}, iteration={s.get('iteration')}, {s.get('state')}: {s.get('status')})"
