"""Experiment trackers a run's metrics also go to: MLflow (``log.mlflow``) and Weights & Biases (``log.wandb``).

Each run (each sweep trial) is one tracker run: its config as parameters, each iteration's metrics as
they are logged (`rlightning.engine.metrics.MetricsLog` hands every row to its trackers). Runs of one
experiment share ``log.group``: MLflow's experiment and W&B's group (a sweep sets it to its name).

MLflow goes to ``log.mlflow_uri`` (an ``mlflow server``) or a local SQLite store,
``<log.run_dir>/mlflow.db``; `prepare_tracking` creates that store once, before a sweep's trials open
it at the same time. W&B writes under the run folder; ``log.wandb_mode="offline"`` keeps it there
(``wandb sync`` uploads it later).

    cfg.log.mlflow = True          # mlflow ui --backend-store-uri sqlite:///runs/mlflow.db
    cfg.log.wandb = True; cfg.log.wandb_mode = "offline"
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

#: The tracker experiment (MLflow) and group (W&B) of runs with no ``log.group``.
DEFAULT_GROUP = "rlightning"
#: MLflow's longest parameter value (longer config values are cut, with "...").
MAX_PARAM_CHARS = 6000


def flat_config(cfg: MainConfig) -> Dict[str, Any]:
    """The config as dotted path -> value (the command line's override names): lists and None kept as values."""
    out: Dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict) and value:
            for key, item in value.items():
                walk(f"{prefix}.{key}" if prefix else str(key), item)
        else:
            out[prefix] = value

    walk("", cfg.model_dump(mode="json"))
    return out


def _numeric(row: Dict[str, Any]) -> Dict[str, float]:
    return {
        k: float(v) for k, v in row.items() if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "time"
    }


def mlflow_uri(cfg: MainConfig) -> str:
    """``log.mlflow_uri``, or the local store ``sqlite:///<log.run_dir>/mlflow.db`` (an absolute path)."""
    if cfg.log.mlflow_uri:
        return cfg.log.mlflow_uri
    root = Path(cfg.log.run_dir).expanduser().resolve()
    return f"sqlite:///{root / 'mlflow.db'}"


def _mlflow_experiment(client: Any, name: str) -> str:
    """The id of MLflow experiment ``name``, created when missing (another process may create it first)."""
    from mlflow.exceptions import MlflowException

    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except MlflowException:
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def _mlflow_client(uri: str) -> Any:
    from mlflow.tracking import MlflowClient

    if uri.startswith("sqlite:///"):
        Path(uri[len("sqlite:///") :]).parent.mkdir(parents=True, exist_ok=True)
    return MlflowClient(tracking_uri=uri)


def prepare_tracking(cfg: MainConfig) -> MainConfig:
    """Fix what a sweep's trials must share before they start: the MLflow store (created here, once)
    and experiment, as absolute settings of a copy of ``cfg`` (trials write their runs elsewhere).

    Raises:
        RuntimeError: the MLflow store cannot be reached (its URI named).
    """
    if not cfg.log.mlflow:
        return cfg
    out = cfg.model_copy(deep=True)
    out.log.mlflow_uri = mlflow_uri(cfg)
    try:
        _mlflow_experiment(_mlflow_client(out.log.mlflow_uri), out.log.group or DEFAULT_GROUP)
    except Exception as err:  # noqa: BLE001 - any store failure: name the URI before trials start
        raise RuntimeError(f"log.mlflow: cannot reach MLflow at {out.log.mlflow_uri!r}: {err}") from err
    return out


class MlflowTracker:
    """One MLflow run: the flattened config as params, each iteration's numeric metrics at step env_steps.

    Uses an `MlflowClient` (no process-wide active run), so several runs of one kernel log side by side.
    """

    def __init__(self, cfg: MainConfig, run_dir: Path, name: str) -> None:
        from mlflow.entities import Param

        self.uri = mlflow_uri(cfg)
        self.client = _mlflow_client(self.uri)
        group = cfg.log.group or DEFAULT_GROUP
        try:
            experiment = _mlflow_experiment(self.client, group)
            run = self.client.create_run(
                experiment, run_name=name, tags={"rlightning.run_dir": str(run_dir), "rlightning.group": group}
            )
        except Exception as err:  # noqa: BLE001 - name where it tried to log
            raise RuntimeError(f"log.mlflow: cannot start a run at {self.uri!r}: {err}") from err
        self.run_id = run.info.run_id
        params = [Param(k, _param_value(v)) for k, v in flat_config(cfg).items()]
        for i in range(0, len(params), 100):  # MLflow takes at most 100 params per batch
            self.client.log_batch(self.run_id, params=params[i : i + 100])
        self._warned = False

    def log(self, row: Dict[str, Any]) -> None:
        from mlflow.entities import Metric

        values = _numeric(row)
        step = int(values.get("env_steps", values.get("iteration", 0)))
        stamp = int(1000 * float(row.get("time", time.time())))
        try:
            self.client.log_batch(self.run_id, metrics=[Metric(k, v, stamp, step) for k, v in values.items()])
        except Exception as err:  # noqa: BLE001 - a tracker outage must not stop training
            if not self._warned:
                logger.warning("log.mlflow: metrics not logged to %s (%s); training goes on", self.uri, err)
                self._warned = True

    def close(self, failed: bool = False) -> None:
        try:
            self.client.set_terminated(self.run_id, "FAILED" if failed else "FINISHED")
        except Exception as err:  # noqa: BLE001
            logger.warning("log.mlflow: run %s not marked finished at %s (%s)", self.run_id, self.uri, err)


def _param_value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= MAX_PARAM_CHARS else text[: MAX_PARAM_CHARS - 3] + "..."


class WandbTracker:
    """One W&B run in ``log.wandb_project``, grouped by ``log.group``; files under ``<run_dir>/wandb``.

    Metrics go without W&B's ``step`` (its own counter), ``env_steps`` and ``iteration`` among them: a PBT
    trial that continues from another's checkpoint goes back in env steps, which W&B's step may not.
    """

    def __init__(self, cfg: MainConfig, run_dir: Path, name: str) -> None:
        import wandb

        run_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(
            project=cfg.log.wandb_project,
            group=cfg.log.group or DEFAULT_GROUP,
            name=name,
            config=cfg.model_dump(mode="json"),
            dir=str(run_dir),
            mode=cfg.log.wandb_mode,
            reinit="create_new",
            settings=wandb.Settings(silent=True, console="off"),
        )
        self._warned = False

    def log(self, row: Dict[str, Any]) -> None:
        try:
            self.run.log(_numeric(row))
        except Exception as err:  # noqa: BLE001 - a tracker outage must not stop training
            if not self._warned:
                logger.warning("log.wandb: metrics not logged (%s); training goes on", err)
                self._warned = True

    def close(self, failed: bool = False) -> None:
        self.run.finish(exit_code=1 if failed else 0)


def open_trackers(cfg: MainConfig, run_dir: Optional[Path]) -> List[Any]:
    """The trackers ``cfg.log`` asks for, each with a run started (none without a run folder)."""
    if run_dir is None or not (cfg.log.mlflow or cfg.log.wandb):
        return []
    name = cfg.log.name or Path(run_dir).name
    trackers: List[Any] = []
    try:
        if cfg.log.mlflow:
            trackers.append(MlflowTracker(cfg, Path(run_dir), name))
        if cfg.log.wandb:
            trackers.append(WandbTracker(cfg, Path(run_dir), name))
    except BaseException:
        for tracker in trackers:
            tracker.close(failed=True)
        raise
    return trackers
