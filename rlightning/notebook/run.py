"""`Run`: one built training run in a notebook: step it, run it (in the background too), show it, tune it."""

from __future__ import annotations

import threading
import time
from typing import Any, Dict, List, Optional

from rlightning.notebook.live import (
    freeze_built_config,
    record_hyperparameters,
    settable_hyperparameters,
    validate_hyperparameters,
)
from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import resolve

logger = get_logger(__name__)

#: Prefix of the metrics keys that record the values ``run.set`` applied.
SET_PREFIX = "set_"


class Run:
    """Env group, policy group, buffer and engine of one run, with notebook conveniences.

    Args:
        name: The name the Lab keeps it under (rebuilding that name replaces it).
        config: The run's config.
        parts: What ``build_run`` returned.
        freeze: Make assignments to the config's built sections raise (they no longer take effect).
    """

    def __init__(self, name: str, config: MainConfig, parts: Any, freeze: bool = False) -> None:
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
        self._lock = threading.Lock()
        self._pause_requested = threading.Event()
        self._pending: Dict[str, float] = {}
        self.hyperparameters: Dict[str, float] = {}
        self.goal = (self.engine.iteration, max(self.engine.iteration, config.train.iterations))
        self.status: Dict[str, Any] = {"state": "idle", "message": "built; nothing run yet", "iteration": 0}
        self.settable = settable_hyperparameters(config.policy, self._has_postprocess())
        if freeze:
            freeze_built_config(config, self.settable)
        self.engine.step_hooks.append(self._apply_pending)

    def _has_postprocess(self) -> bool:
        try:
            from rlightning.policy.builder import resolve_policy_class

            return resolve_policy_class(self.config.policy.type).buffer_postprocess_fn(self.config.policy) is not None
        except Exception:  # noqa: BLE001 - an unknown class has no known postprocess
            return False

    # ------------------------------------------------------------------ stepping
    def step(self) -> Dict[str, Any]:
        """One iteration; returns its metrics."""
        self._check_idle()
        self.goal = (self.engine.iteration, self.engine.iteration + 1)
        self._set_status("running", "one iteration")
        try:
            metrics = self.engine.step()
        except BaseException as err:
            self._set_status("failed", f"failed at iteration {self.engine.iteration + 1}: {_short(err)}")
            raise
        self._set_status("idle", f"stepped to iteration {self.engine.iteration}")
        return metrics

    def _limits(self, iterations: Optional[int], kwargs: Dict[str, Any]) -> Dict[str, Any]:
        cfg = self.config.train
        if iterations is None:
            iterations = max(0, cfg.iterations - self.engine.iteration)
        if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 0:
            raise ValueError(f"iterations must be an int >= 0 (or None: up to train.iterations), got {iterations!r}")
        kwargs = dict(kwargs)
        kwargs.setdefault("env_steps", cfg.total_env_steps)
        kwargs.setdefault("until_return", cfg.target_return)
        kwargs["iterations"] = iterations
        return kwargs

    def _drive(self, limits: Dict[str, Any]) -> List[Dict[str, Any]]:
        """``engine.run`` with this run's goal, pause check, status line and (optional) progress view."""
        start = self.engine.iteration
        self.goal = (start, start + limits["iterations"])
        self._set_status("running", f"running to iteration {self.goal[1]}")
        progress = limits.pop("progress", None)
        bar = _progress_view(self) if progress else None
        callbacks = [*limits.pop("callbacks", ()), self._between_iterations]
        if bar is not None:
            callbacks.append(lambda engine, metrics: bar.update())
        history: List[Dict[str, Any]] = []
        try:
            history = self.engine.run(**limits, callbacks=callbacks, progress=False)
        except BaseException as err:
            self._set_status("failed", f"failed at iteration {self.engine.iteration + 1}: {_short(err)}")
            raise
        finally:
            if self.status["state"] == "running":
                self._set_status(*self._stop_reason(history, limits))
            if bar is not None:
                bar.close()
        return history

    def _stop_reason(self, history: List[Dict[str, Any]], limits: Dict[str, Any]) -> tuple:
        it = self.engine.iteration
        last = history[-1] if history else {}
        ret, target = last.get("episode_return_mean"), limits.get("until_return")
        if target is not None and ret is not None and ret >= target:
            return "done", f"target return {target:g} reached at iteration {it} (mean return {ret:.1f})"
        steps_limit = limits.get("env_steps")
        if steps_limit is not None and self.engine.env_steps >= steps_limit:
            return "done", f"env-step limit {steps_limit} reached at iteration {it}"
        if self._pause_requested.is_set():
            return "paused", f"paused at iteration {it}; resume() continues to iteration {self.goal[1]}"
        if len(history) >= limits["iterations"]:
            return "done", f"finished {len(history)} iteration(s), at iteration {it}"
        return "stopped", f"stopped at iteration {it}"

    def _between_iterations(self, engine: Any, metrics: Dict[str, Any]) -> Optional[bool]:
        return False if self._pause_requested.is_set() else None

    def run(self, iterations: Optional[int] = None, **kwargs: Any) -> List[Dict[str, Any]]:
        """Run iterations in this cell with a progress view (``BaseEngine.run``'s stop conditions).

        The progress counts iterations of the run (``12/212`` after ``run(iterations=200)`` from
        iteration 12), as the panel does.
        """
        self._check_idle()
        limits = self._limits(iterations, kwargs)
        limits.setdefault("progress", self.config.log.progress)
        self._pause_requested.clear()
        return self._drive(limits)

    def start(self, iterations: Optional[int] = None, **kwargs: Any) -> Run:
        """Run iterations in a background thread; the cell returns at once and the panel keeps updating."""
        self._check_idle()
        limits = self._limits(iterations, kwargs)
        limits["progress"] = False
        self._thread_result = []
        self._thread_error = None
        self._pause_requested.clear()
        self.goal = (self.engine.iteration, self.engine.iteration + limits["iterations"])
        self._set_status("running", f"running to iteration {self.goal[1]}")

        def target() -> None:
            try:
                self._thread_result = self._drive(limits)
            except BaseException as err:  # noqa: BLE001 - reported by wait()/stop() and the status line
                logger.error("background run %r failed: %s", self.name, _short(err))
                self._thread_error = err

        self._thread = threading.Thread(target=target, name=f"rlightning-run-{self.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def closed(self) -> bool:
        """True once `close` has run (the run's workers are gone; build it again to go on)."""
        return self._closed

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
            raise RuntimeError(f"background run {self.name!r} failed: {_short(err)}") from err
        return self._thread_result

    def stop(self, timeout: Optional[float] = 120.0) -> List[Dict[str, Any]]:
        """Ask a background run to stop after its current phase and wait for it."""
        if self.is_running:
            self._set_status("running", "stopping after the current phase")
        self.engine.stop()
        return self.wait(timeout)

    def pause(self) -> None:
        """Let a background run finish its current iteration, then hold (``resume()`` goes on)."""
        if not self.is_running:
            raise RuntimeError(f"run {self.name!r} is not running in the background; nothing to pause")
        self._pause_requested.set()
        self._set_status("running", "pausing after the current iteration")

    def resume(self) -> Run:
        """Continue a paused (or stopped) run in the background, up to the goal it had."""
        self._check_idle()
        remaining = self.goal[1] - self.engine.iteration
        if remaining <= 0:
            raise RuntimeError(
                f"run {self.name!r} already reached iteration {self.goal[1]}; start(iterations=N) runs more"
            )
        return self.start(iterations=remaining)

    def _check_idle(self) -> None:
        if self._closed:
            raise RuntimeError(f"run {self.name!r} is closed; build it again with lab.build(cfg)")
        if self.is_running:
            raise RuntimeError(f"run {self.name!r} is running in the background; call run.stop() first")

    def _set_status(self, state: str, message: str) -> None:
        with self._lock:
            self.status = {"state": state, "message": message, "iteration": self.engine.iteration, "time": time.time()}

    # ------------------------------------------------------------------ live hyperparameters
    def set(self, **values: float) -> Dict[str, float]:
        """Change hyperparameters (``lr``, ``ent_coef``, ``clip_coef``, ...) from the next iteration on.

        Every train worker (in this process or a Ray actor) gets them before its next ``train()``,
        and the metrics of that iteration and the following ones record them as ``set_<name>``.

        Raises:
            KeyError: a name that cannot change on a built run (the message lists those that can).
            ValueError: a value the config rejects.
        """
        if self._closed:
            raise RuntimeError(f"run {self.name!r} is closed; build it again with lab.build(cfg)")
        checked = validate_hyperparameters(self.config.policy, self.settable, values)
        with self._lock:
            self._pending.update(checked)
        if not self.is_running:
            self._apply_pending(self.engine, record=False)
        return dict(checked)

    def _apply_pending(self, engine: Any, record: bool = True) -> Dict[str, Any]:
        with self._lock:
            pending, self._pending = self._pending, {}
        if pending:
            workers = list(getattr(self.policy_group, "train_workers", []))
            resolve([w.submit("set_hyperparameters", pending) for w in workers])
            record_hyperparameters(self.config.policy, pending)
            self.hyperparameters.update(pending)
            logger.info("run %r: %s from iteration %d", self.name, pending, engine.iteration + 1)
        return {f"{SET_PREFIX}{k}": v for k, v in self.hyperparameters.items()} if record else {}

    # ------------------------------------------------------------------ views
    @property
    def timing(self) -> Any:
        """The engine's `Timing` (``.plot()``, ``.plot_latency()``, ``.plot_throughput()``, ``.summary()``)."""
        return self.engine.timing

    @property
    def metrics(self) -> List[Dict[str, Any]]:
        """Metrics of every iteration so far."""
        return self.engine.metrics.history

    def metrics_df(self) -> Any:
        """The metrics as a pandas DataFrame, one row per iteration (``pip install 'rlightning[notebook]'``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("run.metrics_df() needs pandas: pip install 'rlightning[notebook]'") from None
        return pd.DataFrame(list(self.metrics)).set_index("iteration", drop=False) if self.metrics else pd.DataFrame()

    def show(self, **options: Any) -> Any:
        """Display the control panel (buttons, status, charts, buffer, episodes, timing, workers) and return it.

        As a cell's last expression it is displayed once.
        """
        from rlightning.widgets.panel import ControlPanel

        panel = ControlPanel(self, **options)
        panel.display()
        return panel

    def record(self, episodes: int = 1, max_steps: int = 2_000, fps: int = 30) -> Any:
        """Play the current policy (deterministic) for ``episodes`` episodes and show them as inline videos.

        Returns an `EpisodePlayer` (its ``state`` has each episode's return and length). Needs
        ``imageio`` and ``imageio-ffmpeg`` (the notebook extra). The run must not be training.
        """
        self._check_idle()
        from rlightning.notebook.record import record_episodes
        from rlightning.widgets.player import EpisodePlayer

        return EpisodePlayer(record_episodes(self, episodes, max_steps=max_steps, fps=fps))

    def play(self, opponent: Any = "random", seat: Optional[str] = None, seed: Optional[int] = None) -> Any:
        """One game of a turn-based env (``env.backend: pettingzoo_aec`` / ``openspiel``): the current policy
        (greedy) against ``opponent``, as text boards (`rlightning.selfplay.matches.GamePlay`).

        ``opponent``: ``"random"``, ``"scripted"``, a league snapshot (``"latest"``, ``"iter_000010"``), a
        checkpoint folder or an object with ``act(obs, seat)``; ``seat``: the policy's seat (None: the first).

        Raises:
            ValueError: not a turn-based game, or an unknown opponent (the choices named).
        """
        self._check_idle()
        from rlightning.env.turn_based_env import TurnBasedEnv
        from rlightning.env.worker_slot import resolve_env_class
        from rlightning.selfplay.matches import play_game, resolve_player
        from rlightning.selfplay.opponents import PolicyOpponent

        if not issubclass(resolve_env_class(self.config.env), TurnBasedEnv):
            raise ValueError(
                f"run.play plays turn-based games (env.backend pettingzoo_aec or openspiel); this run's env is "
                f"{self.config.env.name!r} on backend {self.config.env.backend!r} (use run.record for videos)"
            )
        meta = self.env_group.env_metas[0]
        seat = seat if seat is not None else next(iter(meta.action_space.spaces))
        me = PolicyOpponent.from_weights(
            self.config.policy, meta, self.policy_group.get_weights(), "policy", deterministic=True
        )
        other = resolve_player(opponent, self.config.env, meta, getattr(self.engine, "league", None))
        return play_game(self.config.env, me, other, seat, seed=seed)

    # ------------------------------------------------------------------ using the policy
    def evaluate(self, episodes: Optional[int] = None) -> Dict[str, Any]:
        """Play ``episodes`` deterministic episodes on an env of their own (None: ``train.eval_episodes``).

        Returns their statistics: ``episodes``, ``return_mean``, ``return_std``, ``return_min``,
        ``return_max``, ``length_mean``. The run must not be training.

        Raises:
            ValueError: ``episodes`` is not an int >= 1.
        """
        self._check_idle()
        if episodes is not None and (isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1):
            raise ValueError(
                f"run.evaluate: episodes must be an int >= 1 (or None: train.eval_episodes), got {episodes!r}"
            )
        return self.engine.evaluate(episodes)

    def policy(self) -> Any:
        """The current policy alone: a `StandalonePolicy` with a copy of the train workers' weights.

        ``pi.predict(obs)`` acts on raw gymnasium observations in this process, without Ray or a Lab; later
        training does not change it (call ``run.policy()`` again for newer weights).
        """
        if self._closed:
            raise RuntimeError(f"run {self.name!r} is closed; build it again with lab.build(cfg)")
        from rlightning.policy.standalone import StandalonePolicy

        return StandalonePolicy.from_run(self)

    def collect_dataset(
        self,
        path_or_id: str,
        episodes: int = 10,
        deterministic: bool = False,
        noise: float = 0.0,
        **kwargs: Any,
    ) -> Any:
        """Play the current policy for ``episodes`` episodes and write them as a Minari dataset (atomically).

        ``noise`` adds exploration (a fraction of a Box's half-range as Gaussian noise; a Discrete action's
        epsilon); ``ref_max_score="policy"`` records this policy's deterministic return as the expert
        reference. See `rlightning.datasets.collect.collect_dataset` for the other arguments. Returns the
        dataset's `DatasetInfo`. Needs ``pip install 'rlightning[minari]'``.
        """
        self._check_idle()
        from rlightning.datasets.collect import collect_dataset

        return collect_dataset(
            self.policy(),
            self.config,
            path_or_id,
            episodes=episodes,
            deterministic=deterministic,
            noise=noise,
            **kwargs,
        )

    def export(self, path: str, format: str = "onnx", action_mask: bool = False) -> Any:
        """Write the current policy's deterministic acting to ``path`` as ``"onnx"`` or ``"torchscript"``.

        The exported model gives `policy().predict`'s deterministic actions (`rlightning.policy.export`);
        ONNX needs ``pip install 'rlightning[export]'``. Returns the path.

        Raises:
            ValueError: an unknown ``format`` (the valid ones named).
        """
        from rlightning.policy.export import check_format

        check_format(format)
        return self.policy().export(path, format=format, action_mask=action_mask)

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

    def close(self, free_timeout_s: float = 30.0) -> None:
        """Stop a background run, then every worker of this run; returns once their CPUs/GPUs are free.

        Ray frees a stopped actor's resources a moment after ``ray.kill`` returns; waiting for them
        here lets a ``lab.build`` right after this succeed on a cluster the run filled.

        Args:
            free_timeout_s: At most this many seconds to wait for the resources (0: do not wait).
        """
        if self._closed:
            return
        if self.is_running:
            self.stop()
        from rlightning.notebook.checks import actor_resources
        from rlightning.utils.ray.free import free_resources, wait_until_free

        held = actor_resources(self.config)
        before = free_resources() if free_timeout_s > 0 and any(held.values()) else None
        self.engine.close()
        self._closed = True
        if before:
            wait_until_free(held, before, timeout_s=free_timeout_s)
        self._set_status("closed", "closed")

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self.is_running else "idle")
        return (
            f"Run({self.name!r}, {self.config.engine}, {self.config.policy.type} on {self.config.env.name}, "
            f"iteration={self.engine.iteration}, env_steps={self.engine.env_steps}, {state})"
        )


def _short(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"[:300]


def _progress_view(run: Run) -> Any:
    """A progress line for ``run.run()``: a widget in a notebook, else a tqdm bar on stderr."""
    from rlightning.widgets.progress import progress_for

    return progress_for(run)
