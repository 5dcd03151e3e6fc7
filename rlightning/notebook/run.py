"""`Run`: one built training run in a notebook: step it, run it (in the background too), show it."""

from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)


class Run:
    """Env group, policy group, buffer and engine of one run, with notebook conveniences.

    Args:
        name: The name the Lab keeps it under (rebuilding that name replaces it).
        config: The run's config.
        parts: What ``build_run`` returned.
    """

    def __init__(self, name: str, config: MainConfig, parts: Any) -> None:
        self.name = name
        self.config = config
        self.env_group = parts.env_group
        self.policy_group = parts.policy_group
        self.buffer = parts.buffer
        self.engine = parts.engine
        self._thread: Optional[threading.Thread] = None
        self._thread_result: List[Dict[str, Any]] = []
        self._thread_error: Optional[BaseException] = None
        self._closed = False

    # ------------------------------------------------------------------ stepping
    def step(self) -> Dict[str, Any]:
        """One iteration; returns its metrics."""
        self._check_idle()
        return self.engine.step()

    def run(self, iterations: Optional[int] = None, **kwargs: Any) -> List[Dict[str, Any]]:
        """Run iterations in this cell with a progress bar (see ``BaseEngine.run`` for the stop conditions)."""
        self._check_idle()
        return self.engine.run(iterations=iterations, **kwargs)

    def start(self, iterations: Optional[int] = None, **kwargs: Any) -> Run:
        """Run iterations in a background thread; the cell returns at once and widgets keep updating."""
        self._check_idle()
        kwargs.setdefault("progress", False)
        self._thread_result = []
        self._thread_error = None

        def target() -> None:
            try:
                self._thread_result = self.engine.run(iterations=iterations, **kwargs)
            except BaseException as err:  # noqa: BLE001 - reported by wait()/stop()
                logger.error("background run %r failed: %r", self.name, err)
                self._thread_error = err

        self._thread = threading.Thread(target=target, name=f"rlightning-run-{self.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def is_running(self) -> bool:
        """True while a background run is going."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """Wait for a background run to finish; returns its metrics (re-raises its error)."""
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                return []
            self._thread = None
        if self._thread_error is not None:
            err, self._thread_error = self._thread_error, None
            raise RuntimeError(f"background run {self.name!r} failed: {err!r}") from err
        return self._thread_result

    def stop(self, timeout: Optional[float] = 120.0) -> List[Dict[str, Any]]:
        """Ask a background run to stop after its current phase and wait for it."""
        self.engine.stop()
        return self.wait(timeout)

    def _check_idle(self) -> None:
        if self._closed:
            raise RuntimeError(f"run {self.name!r} is closed; build it again with lab.build(cfg)")
        if self.is_running:
            raise RuntimeError(f"run {self.name!r} is running in the background; call run.stop() first")

    # ------------------------------------------------------------------ views
    @property
    def timing(self) -> Any:
        """The engine's `Timing` (``.plot()``, ``.plot_latency()``, ``.plot_throughput()``, ``.summary()``)."""
        return self.engine.timing

    @property
    def metrics(self) -> List[Dict[str, Any]]:
        """Metrics of every iteration so far."""
        return self.engine.metrics.history

    def show(self) -> Any:
        """Display the live dashboard (progress, metrics, BufferView, EpisodeTable) and return it."""
        from rlightning.widgets import EngineDashboard

        dash = EngineDashboard(self)
        try:
            from IPython.display import display

            display(dash)
        except ImportError:
            pass
        return dash

    # ------------------------------------------------------------------ lifecycle
    def save(self, path: Optional[str] = None, include_buffer: bool = False) -> Any:
        """Write a checkpoint folder and return its path."""
        return self.engine.save(path, include_buffer=include_buffer)

    def load(self, path: str) -> Run:
        """Continue from a checkpoint folder (counters, return curve, weights, buffer if saved); returns self.

        Raises:
            RuntimeError: the run is going in the background (stop it first).
        """
        self._check_idle()
        self.engine.load(path)
        return self

    def close(self) -> None:
        """Stop a background run, then every worker of this run."""
        if self._closed:
            return
        if self.is_running:
            self.stop()
        self.engine.close()
        self._closed = True

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self.is_running else "idle")
        return (
            f"Run({self.name!r}, {self.config.engine}, {self.config.policy.type} on {self.config.env.name}, "
            f"iteration={self.engine.iteration}, env_steps={self.engine.env_steps}, {state})"
        )
