"""`EngineDashboard`: progress, metric sparklines, current phase, restarts and env errors, and the buffer and
episode-table views."""

from __future__ import annotations

from typing import Any, Dict

from rlightning.widgets._base import LiveView, esc, fmt, sparkline
from rlightning.widgets.buffer_view import BufferViewWidget
from rlightning.widgets.episode_table import EpisodeTableWidget

SPARK_KEYS = (
    ("episode_return_mean", "return"),
    ("policy_loss", "policy loss"),
    ("q_loss", "q loss"),
    ("env_steps_per_sec", "steps/s"),
    ("policy_lag", "policy lag"),
)


def engine_state(engine: Any) -> Dict[str, Any]:
    """The dashboard's state from an engine: counters, phase, metric series, timing summary."""
    history = engine.metrics.history
    target = engine.config.train.iterations
    series = {}
    for key, _ in SPARK_KEYS:
        vals = [r[key] for r in history if isinstance(r.get(key), (int, float))]
        if vals:
            series[key] = vals[-200:]
    counter = getattr(engine, "restart_counts", None)
    restarts = counter() if counter is not None else {}
    return {
        "iteration": engine.iteration,
        "target_iterations": target,
        "env_steps": engine.env_steps,
        "episodes": engine.episodes,
        "phase": engine.phase,
        "last": dict(engine.last_metrics),
        "series": series,
        "restarts": {k: int(restarts.get(k, 0)) for k in ("env_restarts", "eval_restarts", "storage_restarts")},
        "env_errors": int(restarts.get("env_errors", 0)),
        "timing": {k: v.get("mean") for k, v in engine.timing.summary().items() if "mean" in v},
    }


def agent_returns_html(last: Dict[str, Any]) -> str:
    """Multi-agent runs: each agent's mean return (the ``agent_return_mean/<agent>`` metrics), one line."""
    items = sorted((k.split("/", 1)[1], v) for k, v in last.items() if k.startswith("agent_return_mean/"))
    if not items:
        return ""
    body = " · ".join(f"{esc(a)} {esc(fmt(v))}" for a, v in items)
    return f"<div class='rl-agent-returns'>per-agent return: {body}</div>"


class EngineDashboard(LiveView):
    """The run dashboard. Accepts a notebook `Run` or an engine.

    It refreshes itself while a run is going (``watch``), and the BufferView
    and EpisodeTable views below it refresh with it.
    """

    def __init__(self, run_or_engine: Any, interval: float = 0.5, live: bool = True) -> None:
        super().__init__()
        self.run = run_or_engine if hasattr(run_or_engine, "engine") else None
        self.engine = getattr(run_or_engine, "engine", run_or_engine)
        self.buffer_view = BufferViewWidget(self.engine.buffer)
        env_group = getattr(self.engine, "env_group", None)
        env_stats = getattr(env_group, "stats", None)
        self.episode_table_view = EpisodeTableWidget(self.engine.buffer, env_stats)
        self.progress = None
        self.container = None
        if self._w is not None:
            self.progress = self._w.IntProgress(
                min=0, max=max(1, self.engine.config.train.iterations), description="iteration"
            )
            self.container = self._w.VBox(
                [self.progress, self.widget, self.buffer_view.widget, self.episode_table_view.widget]
            )
        self.refresh()
        if live:
            self.watch(interval)

    def compute_state(self) -> Dict[str, Any]:
        return engine_state(self.engine)

    def refresh(self) -> Dict[str, Any]:
        state = super().refresh()
        self.buffer_view.refresh()
        self.episode_table_view.refresh()
        if self.progress is not None:
            self.progress.max = max(1, state["target_iterations"], state["iteration"])
            self.progress.value = state["iteration"]
        return state

    def render_html(self, s: Dict[str, Any]) -> str:
        sparks = "".join(sparkline(s["series"][k], label=label) for k, label in SPARK_KEYS if k in s["series"])
        timing = ", ".join(f"{esc(k)} {v * 1e3:.0f} ms" for k, v in s["timing"].items() if isinstance(v, float))
        r = s["restarts"]
        return (
            "<div class='rlightning-dashboard'>"
            f"<b>Engine</b> iteration <span class='rl-iteration'>{s['iteration']}</span>/{s['target_iterations']}"
            f" · env steps <span class='rl-env-steps'>{s['env_steps']}</span> · episodes {s['episodes']}"
            f" · phase <span class='rl-phase'>{esc(s['phase'])}</span>"
            f" · restarts <span class='rl-restarts'>env {r['env_restarts']}, eval {r['eval_restarts']},"
            f" storage {r['storage_restarts']}</span>"
            f" · env errors <span class='rl-env-errors'>{s['env_errors']}</span>"
            f" · return {esc(fmt(s['last'].get('episode_return_mean')))}"
            f"{agent_returns_html(s['last'])}<div>{sparks}</div>"
            f"<div style='font-size:11px'>mean time per iteration: {timing}</div></div>"
        )

    def _ipython_display_(self) -> None:
        from IPython.display import HTML, display

        self.refresh()
        if self.container is not None:
            display(self.container)
        else:
            from rlightning.widgets._base import INSTALL_HINT

            html = self.render_html(self.state) + self.buffer_view.render_html(self.buffer_view.state)
            html += self.episode_table_view.render_html(self.episode_table_view.state)
            display(HTML(html + f"<p><i>{esc(INSTALL_HINT)}</i></p>"))

    def _repr_html_(self) -> str:
        self.refresh()
        return (
            self.render_html(self.state)
            + self.buffer_view.render_html(self.buffer_view.state)
            + self.episode_table_view.render_html(self.episode_table_view.state)
        )

    def close(self) -> None:
        """Stop refreshing."""
        self.unwatch()
