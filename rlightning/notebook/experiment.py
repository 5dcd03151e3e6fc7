"""`Experiment`: a sweep of rlightning runs on Ray Tune, going in a background thread.

    exp = lab.sweep(cfg, {"policy.optim.lr": tune.loguniform(1e-4, 3e-3)}, seeds=3, scheduler="asha")
    exp.wait()
    exp.results_df()        # one row per trial: status, varied values, iterations, env steps, last/best metric, error
    exp.best_config()       # a MainConfig ready for lab.build
    exp.best_checkpoint()   # the best trial's newest checkpoint folder (run.load(path))

The trials table and curves are kept from Tune's callbacks as results arrive, so they can be read
(and shown, `Experiment.show`) while the sweep runs; the kernel stays free.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from rlightning.notebook.sweep_space import SweepSpec, config_for
from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

#: Columns of `Experiment.results_df` before the varied values.
COLUMNS = ("trial_id", "status", "iterations", "env_steps", "retries", "last", "best", "error")


def _tracker_class() -> type:
    from ray.tune import Callback

    class _Tracker(Callback):
        """Keeps each trial's status, reported rows and error as Tune hands them over."""

        def __init__(self, experiment: Optional[Experiment]) -> None:
            self.experiment = experiment

        def __getstate__(self) -> Dict[str, Any]:
            return {"experiment": None}  # Tune saves its run config; the live Experiment stays here

        def _update(self, trial: Any, **change: Any) -> None:
            if self.experiment is not None:
                self.experiment._update(trial, **change)

        def on_trial_start(self, iteration: int, trials: List[Any], trial: Any, **info: Any) -> None:
            self._update(trial, status="RUNNING")

        def on_trial_result(self, iteration: int, trials: List[Any], trial: Any, result: Dict, **info: Any) -> None:
            self._update(trial, result=result)

        def on_trial_complete(self, iteration: int, trials: List[Any], trial: Any, **info: Any) -> None:
            self._update(trial, status="TERMINATED")

        def on_trial_error(self, iteration: int, trials: List[Any], trial: Any, **info: Any) -> None:
            self._update(trial, status="ERROR", error=_error_of(trial))

        def on_trial_recover(self, iteration: int, trials: List[Any], trial: Any, **info: Any) -> None:
            self._update(trial, status="RETRYING", error=_error_of(trial), retried=True)

    return _Tracker


def _error_of(trial: Any) -> str:
    path = getattr(trial, "error_file", None)
    try:
        text = Path(path).read_text() if path else ""
    except OSError:
        text = ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "failed"


def _stopper_class() -> type:
    from ray.tune import Stopper

    class _Stopper(Stopper):
        """Stops a trial (`Experiment.stop_trial`) or the whole sweep (`Experiment.stop`) on request."""

        def __init__(self) -> None:
            self.trials: set = set()
            self.all = False

        def __call__(self, trial_id: str, result: Dict) -> bool:
            return trial_id in self.trials

        def stop_all(self) -> bool:
            return self.all

    return _Stopper


class Experiment:
    """A running or finished sweep; built by `Lab.sweep` / `Lab.seeds`, not by hand.

    Args:
        spec: The checked sweep.
        path: The Tune experiment folder (``resume=True`` continues it).
        make_tuner: Builds the ``tune.Tuner`` given the callbacks and the stopper.
    """

    def __init__(self, spec: SweepSpec, path: Path, make_tuner: Callable[[list, Any], Any]) -> None:
        self.spec = spec
        self.path = path
        self.name = path.name
        self._lock = threading.Lock()
        self._trials: Dict[str, Dict[str, Any]] = {}
        self._order: List[str] = []
        self._stopper = _stopper_class()()
        self._make_tuner = make_tuner
        self._result_grid: Any = None
        self._error: Optional[BaseException] = None
        self._thread: Optional[threading.Thread] = None
        self.started = time.time()
        self.finished: Optional[float] = None

    # ------------------------------------------------------------------ running
    def start(self) -> Experiment:
        """Run the sweep in a background thread (called by the Lab); returns self."""
        tuner = self._make_tuner([_tracker_class()(self)], self._stopper)

        def target() -> None:
            try:
                self._result_grid = tuner.fit()
                self._collect_grid()
            except BaseException as err:  # noqa: BLE001 - reported by wait()
                logger.error("sweep %r failed: %s", self.name, err)
                self._error = err
            finally:
                self.finished = time.time()

        self._thread = threading.Thread(target=target, name=f"rlightning-sweep-{self.name}", daemon=True)
        self._thread.start()
        return self

    @property
    def is_running(self) -> bool:
        """True while the sweep's thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def wait(self, timeout: Optional[float] = None) -> Experiment:
        """Wait for the sweep to end (or ``timeout`` seconds); returns self.

        Raises:
            RuntimeError: the sweep itself failed (a failed trial does not raise: see ``results_df``).
        """
        if self._thread is not None:
            self._thread.join(timeout)
        if self._error is not None:
            raise RuntimeError(f"sweep {self.name!r} failed: {self._error}") from self._error
        return self

    def request_stop(self) -> None:
        """Ask every trial to stop after its current iteration; returns at once (`stop` also waits)."""
        self._stopper.all = True

    def stop(self, timeout: Optional[float] = 120.0) -> Experiment:
        """Stop every trial after its current iteration and wait for the sweep to end."""
        self.request_stop()
        return self.wait(timeout)

    def stop_trial(self, trial_id: str) -> None:
        """Stop one trial after its current iteration (the others go on).

        Raises:
            KeyError: no such trial (the known ones are listed).
        """
        if trial_id not in self._trials:
            raise KeyError(f"no trial {trial_id!r} in sweep {self.name!r}; trials: {', '.join(self._order)}")
        self._stopper.trials.add(trial_id)

    # ------------------------------------------------------------------ state kept from Tune's callbacks
    def _update(
        self,
        trial: Any,
        status: Optional[str] = None,
        result: Optional[Dict] = None,
        error: Optional[str] = None,
        retried: bool = False,
    ) -> None:
        with self._lock:
            entry = self._trials.get(trial.trial_id)
            if entry is None:
                entry = self._trials[trial.trial_id] = {
                    "params": {k: trial.config.get(k) for k in self.spec.varied},
                    "status": "PENDING",
                    "rows": [],
                    "error": None,
                    "retries": 0,
                }
                self._order.append(trial.trial_id)
            if status is not None:
                entry["status"] = status
            if error is not None:
                entry["error"] = error
            if retried:
                entry["retries"] = entry.get("retries", 0) + 1
            if result is not None:
                row = {k: v for k, v in result.items() if not isinstance(v, dict)}
                entry["rows"].append(row)
                entry["params"] = {k: trial.config.get(k) for k in self.spec.varied}

    def _collect_grid(self) -> None:
        """After ``fit``: statuses and errors of trials the callbacks did not see (a resumed sweep's)."""
        grid = self._result_grid
        for result in grid:
            trial_id = (result.metrics or {}).get("trial_id")
            if trial_id is None:
                continue
            with self._lock:
                entry = self._trials.get(trial_id)
                if entry is None:
                    params = {k: (result.config or {}).get(k) for k in self.spec.varied}
                    entry = self._trials[trial_id] = {
                        "params": params,
                        "status": "TERMINATED",
                        "rows": [],
                        "error": None,
                    }
                    self._order.append(trial_id)
                    if result.metrics_dataframe is not None:
                        entry["rows"] = result.metrics_dataframe.to_dict("records")
                if result.error is not None:
                    entry["status"] = "ERROR"
                    entry["error"] = entry["error"] or str(result.error).strip().splitlines()[-1][:300]
                entry["checkpoint"] = result.checkpoint.path if result.checkpoint is not None else None
        with self._lock:  # fit() returned: a trial still "running" was stopped with the sweep (exp.stop()),
            for entry in self._trials.values():  # for which Tune calls no callback
                if entry["status"] in ("PENDING", "RUNNING", "RETRYING"):
                    entry["status"] = "TERMINATED"

    def trials(self) -> Dict[str, Dict[str, Any]]:
        """A snapshot: trial id -> ``{"params", "status", "rows", "error"}`` (rows: the reported metrics)."""
        with self._lock:
            return {t: {**self._trials[t], "rows": list(self._trials[t]["rows"])} for t in self._order}

    def _score(self, rows: List[Dict[str, Any]]) -> tuple:
        values = [r[self.spec.metric] for r in rows if isinstance(r.get(self.spec.metric), (int, float))]
        if not values:
            return None, None
        best = max(values) if self.spec.mode == "max" else min(values)
        return values[-1], best

    def results_df(self) -> Any:
        """One row per trial: id, status, varied values, iterations, env steps, retries, last and best metric, error."""
        import pandas as pd

        records = []
        for trial_id, entry in self.trials().items():
            rows = entry["rows"]
            last, best = self._score(rows)
            records.append(
                {
                    "trial_id": trial_id,
                    "status": entry["status"],
                    **entry["params"],
                    "iterations": int(rows[-1].get("iteration", len(rows))) if rows else 0,
                    "env_steps": int(rows[-1].get("env_steps", 0)) if rows else 0,
                    "retries": entry.get("retries", 0),
                    "last": last,
                    "best": best,
                    "error": entry["error"],
                }
            )
        columns = ["trial_id", "status", *self.spec.varied, *COLUMNS[2:]]
        return pd.DataFrame.from_records(records, columns=columns)

    def curves(self) -> Dict[str, Any]:
        """Trial id -> DataFrame of its reported rows (``env_steps``, the metric, ...), in order."""
        import pandas as pd

        return {t: pd.DataFrame(e["rows"]) for t, e in self.trials().items()}

    def exploits(self) -> List[Dict[str, Any]]:
        """PBT exploits in the order they happened: ``trial_id``, ``donor``, ``donor_iteration``, digests."""
        out = []
        for entry in self.trials().values():
            out.extend(json.loads(r["exploit"]) for r in entry["rows"] if isinstance(r.get("exploit"), str))
        return out

    # ------------------------------------------------------------------ the best trial
    def best_trial(self) -> str:
        """The id of the trial with the best last-reported metric (``mode``).

        Raises:
            RuntimeError: no trial reported the metric yet.
        """
        scored = [(self._score(e["rows"])[0], t) for t, e in self.trials().items()]
        scored = [(s, t) for s, t in scored if s is not None]
        if not scored:
            raise RuntimeError(f"no trial of sweep {self.name!r} has reported {self.spec.metric!r} yet")
        pick = max if self.spec.mode == "max" else min
        return pick(scored)[1]

    def best_config(self) -> MainConfig:
        """The best trial's config (the base with its values applied): a MainConfig ready for ``lab.build``."""
        params = self.trials()[self.best_trial()]["params"]
        return config_for(self.spec.base, {k: v for k, v in params.items() if v is not None})

    def best_checkpoint(self) -> Path:
        """The best trial's newest checkpoint: the engine folder ``run.load(path)`` takes.

        Raises:
            RuntimeError: the sweep is still running, or that trial left no checkpoint.
        """
        if self.is_running or self._result_grid is None:
            raise RuntimeError(f"sweep {self.name!r} has not finished; exp.wait() first")
        best = self.best_trial()
        path = self.trials()[best].get("checkpoint")
        if path is None:
            raise RuntimeError(f"trial {best!r} of sweep {self.name!r} saved no checkpoint")
        return Path(path) / "engine"

    # ------------------------------------------------------------------ views
    def show(self, **options: Any) -> Any:
        """Display the live sweep view (trials table, curves, stop buttons) and return it."""
        from rlightning.widgets.experiment import ExperimentView

        view = ExperimentView(self, **options)
        view.display()
        return view

    def __repr__(self) -> str:
        states: Dict[str, int] = {}
        for entry in self.trials().values():
            states[entry["status"]] = states.get(entry["status"], 0) + 1
        running = "running" if self.is_running else "finished"
        return f"Experiment({self.name!r}, {running}, trials={states or 'none yet'}, metric={self.spec.metric!r})"
