"""`lab.submit(cfg)`: a long training as a Ray Job on the cluster, followed and stopped from the notebook.

    job = lab.submit(cfg)            # returns at once; the training runs on the cluster, not in this kernel
    job.status()                     # 'PENDING', 'RUNNING', 'SUCCEEDED', 'FAILED' or 'STOPPED'
    job.logs()                       # what the training printed so far
    job.metrics_df()                 # one row per iteration done so far
    job.wait()                       # follows the logs in the cell until the job ends
    job.stop()

The job runs the command line's ``train`` (``python -m rlightning.cli train config.yaml``, the entry point
of ``./scripts/train``) on the cluster, with the config as the notebook had it, joining the cluster
(``cluster.address="auto"``). It prints one ``rlightning-metrics {...}`` line per iteration, which
`TrainingJob.metrics` reads back through the Jobs API: the notebook needs no access to the head's files.
The job keeps running when the notebook's kernel ends; `Lab.job` finds it again by its id.
With ``max_retries=N`` a driver that dies (killed, or a lost train worker) is started again up to ``N``
times, each from the run's newest complete checkpoint (``train --resume``): the run loses at most
``train.checkpoint_interval`` iterations per retry (set one: without checkpoints a retry starts afresh).

Ray's Jobs API is served by the dashboard: the cluster's head must run it (``ray start --head
--include-dashboard=true``, or ``Lab.local(include_dashboard=True)``) and both sides need Ray's dashboard
packages (``pip install "rlightning[dashboard]"``, ``ray[default]``).
"""

from __future__ import annotations

import json
import shlex
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlightning.notebook.errors import JobsUnavailableError
from rlightning.utils.config import MainConfig, to_yaml
from rlightning.utils.logger import get_cell_logger, get_logger

__all__ = ["METRICS_PREFIX", "TrainingJob", "TrainingJobError", "job_entrypoint", "jobs_client", "submit_training"]

logger = get_logger(__name__)
cell = get_cell_logger(__name__)  # what the user sees in the running cell

#: Start of the line the job prints after each iteration: the prefix, a space, the metrics as JSON.
METRICS_PREFIX = "rlightning-metrics"
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
_EXTRA_HINT = (
    'pip install "rlightning[dashboard]" (Ray\'s ray[default]) here and on the cluster, and a head that runs '
    "the dashboard (`ray start --head --include-dashboard=true`, or Lab.local(include_dashboard=True))"
)


class TrainingJobError(RuntimeError):
    """A submitted training job failed; the message holds Ray's reason and the last lines of its log."""


def dashboard_url() -> Optional[str]:
    """The dashboard address the connected cluster published, as ``http://host:port``; None without one."""
    import ray
    from ray._private.services import get_webui_url_from_internal_kv

    if not ray.is_initialized():
        return None
    url = get_webui_url_from_internal_kv()
    if not url:
        return None
    return url if url.startswith(("http://", "https://")) else f"http://{url}"


def jobs_client(address: Optional[str] = None) -> Any:
    """A `JobSubmissionClient` for the connected cluster's dashboard (or ``address``).

    Raises:
        JobsUnavailableError: Ray's dashboard packages are not installed here, the cluster runs no
            dashboard, or its dashboard does not answer.
    """
    try:
        from ray.dashboard.modules.job import sdk
    except ImportError as err:  # pragma: no cover - part of every Ray install
        raise JobsUnavailableError(f"Ray's job SDK cannot be imported ({err}): {_EXTRA_HINT}") from None
    if sdk.requests is None:  # Ray's SDK imports aiohttp and requests together; without them it is off
        raise JobsUnavailableError(
            f"lab.submit runs the training as a Ray Job, whose client needs Ray's dashboard packages "
            f"(aiohttp, requests), which are not installed: {_EXTRA_HINT}"
        )
    if address is None:
        address = dashboard_url()
    if address is None:
        raise JobsUnavailableError(
            "lab.submit runs the training as a Ray Job, but this cluster runs no dashboard (the Jobs API is "
            f'served by it): {_EXTRA_HINT}; or pass lab.submit(..., dashboard="http://head:8265")'
        )
    try:
        return sdk.JobSubmissionClient(address)
    except (ConnectionError, RuntimeError) as err:
        raise JobsUnavailableError(
            f"the cluster's dashboard at {address} does not answer the Jobs API ({err}); if it listens on the "
            "head's loopback address, forward its port or pass lab.submit(..., dashboard=...)"
        ) from None


def job_config(cfg: MainConfig) -> MainConfig:
    """The config the job trains: ``cfg`` joining the cluster it runs on, without a progress bar."""
    out = cfg.model_copy(deep=True)
    out.cluster.address = "auto"  # the job's driver joins the cluster (RAY_ADDRESS), never starts its own
    out.log.progress = False
    return out


def submit_training(
    client: Any,
    cfg: MainConfig,
    name: str = "train",
    python: str = "python",
    runtime_env: Optional[Dict[str, Any]] = None,
    entrypoint_num_cpus: Optional[float] = None,
    max_retries: int = 0,
) -> TrainingJob:
    """Submit ``cfg`` as a training job through ``client``; returns its `TrainingJob` at once.

    Args:
        client: A `JobSubmissionClient`.
        cfg: The run's config (copied; the job joins the cluster with ``cluster.address="auto"``).
        name: Part of the job's submission id, and its ``metadata["rlightning_run"]``.
        python: The Python interpreter on the cluster that has rlightning installed.
        runtime_env: More of Ray's runtime env for the job (``env_vars``, ``pip``, ...); its
            ``working_dir`` is the folder holding the config.
        entrypoint_num_cpus: CPUs reserved for the job's driver (Ray's default: none).
        max_retries: Start a driver that died again this many times, from the newest checkpoint (see the
            module docstring); 0: never.
    """
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"lab.submit max_retries must be an int >= 0, got {max_retries!r}")
    if not isinstance(cfg, MainConfig):
        raise TypeError(f"lab.submit expects a MainConfig (e.g. load_preset('cartpole_ppo')), got {type(cfg).__name__}")
    if not isinstance(name, str) or not name.replace("-", "").replace("_", "").isalnum():
        raise ValueError(f"lab.submit name must be letters, digits, '-' or '_', got {name!r}")
    env = dict(runtime_env or {})
    if "working_dir" in env:
        raise ValueError("lab.submit runtime_env cannot set working_dir: the job's folder holds its config")
    folder = Path(tempfile.mkdtemp(prefix="rlightning-job-"))
    submission_id = f"rlightning-{name}-{uuid.uuid4().hex[:8]}"
    config = job_config(cfg)
    if config.log.name is None:  # a fixed run folder: a retried driver resumes from it
        config.log.name = submission_id
    (folder / "config.yaml").write_text(to_yaml(config))
    env["working_dir"] = str(folder)
    entrypoint = job_entrypoint(python, str(Path(config.log.run_dir) / config.log.name), max_retries)
    kwargs: Dict[str, Any] = {}
    if entrypoint_num_cpus is not None:
        kwargs["entrypoint_num_cpus"] = entrypoint_num_cpus
    client.submit_job(
        entrypoint=entrypoint,
        submission_id=submission_id,
        runtime_env=env,
        metadata={"rlightning_run": name},
        **kwargs,
    )
    logger.info("submitted %s: %s", submission_id, entrypoint)
    return TrainingJob(client, submission_id)


#: Exit codes of a driver that are not retried: a usage or config error (2), a stop (130).
NOT_RETRIED = (0, 2, 130)


def job_entrypoint(python: str, run_dir: str, max_retries: int = 0) -> str:
    """The job's command: the CLI's ``train config.yaml``; with ``max_retries``, a shell loop that starts a
    driver that died again with ``--resume run_dir``, at most ``max_retries`` times."""
    train = f"{shlex.quote(python)} -m rlightning.cli train config.yaml --quiet --metrics-lines"
    if not max_retries:
        return train
    done = " && ".join(f"[ $rc -ne {code} ]" for code in NOT_RETRIED)
    loop = (
        f"{train}; rc=$?; n=0; while {done} && [ $n -lt {max_retries} ]; do n=$((n+1)); "
        f'echo "rlightning: the driver exited with $rc; retry $n of {max_retries} from the newest checkpoint"; '
        f"{train} --resume {shlex.quote(run_dir)}; rc=$?; done; exit $rc"
    )
    return f"sh -c {shlex.quote(loop)}"


class TrainingJob:
    """A training submitted as a Ray Job: its status, logs and metrics, read through the Jobs API.

    Args:
        client: The `JobSubmissionClient` it was submitted with.
        job_id: Its submission id.
    """

    def __init__(self, client: Any, job_id: str) -> None:
        self.client = client
        self.job_id = job_id
        self._shown = 0  # characters of the log already printed by wait(follow=True)

    # ------------------------------------------------------------------ reading
    def status(self) -> str:
        """``PENDING``, ``RUNNING``, ``SUCCEEDED``, ``FAILED`` or ``STOPPED``."""
        status = self.client.get_job_status(self.job_id)
        return str(getattr(status, "value", status))

    def info(self) -> Any:
        """Ray's `JobDetails` (entry point, times, Ray's message about the end)."""
        return self.client.get_job_info(self.job_id)

    def _raw_logs(self) -> str:
        return self.client.get_job_logs(self.job_id) or ""

    def logs(self, tail: Optional[int] = None) -> str:
        """What the training printed so far, without the metrics lines; ``tail``: only the last lines."""
        lines = [line for line in self._raw_logs().splitlines() if not line.startswith(METRICS_PREFIX)]
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        return "\n".join(lines)

    def metrics(self) -> List[Dict[str, Any]]:
        """The metrics of every iteration done so far (as `Run.metrics`); an iteration run again by a retried
        driver (after its checkpoint) counts once, with its newest row."""
        rows: List[Dict[str, Any]] = []
        for line in self._raw_logs().splitlines():
            if line.startswith(METRICS_PREFIX + " "):
                try:
                    row = json.loads(line[len(METRICS_PREFIX) + 1 :])
                except json.JSONDecodeError:  # a line cut by a stop mid-write
                    continue
                it = row.get("iteration") if isinstance(row, dict) else None
                if isinstance(it, int):  # a resumed driver starts again after its checkpoint
                    rows = [r for r in rows if not (isinstance(r.get("iteration"), int) and r["iteration"] >= it)]
                rows.append(row)
        return rows

    def metrics_df(self) -> Any:
        """`metrics` as a pandas DataFrame, one row per iteration (``pip install 'rlightning[notebook]'``)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("job.metrics_df() needs pandas: pip install 'rlightning[notebook]'") from None
        rows = self.metrics()
        return pd.DataFrame(rows).set_index("iteration", drop=False) if rows else pd.DataFrame()

    # ------------------------------------------------------------------ control
    def wait(self, timeout: Optional[float] = None, follow: bool = True, poll_s: float = 1.0) -> str:
        """Block until the job ends; with ``follow`` its new log lines are printed in the cell meanwhile.

        Returns:
            ``SUCCEEDED`` or ``STOPPED``.

        Raises:
            TrainingJobError: the job failed (Ray's reason and the last log lines).
            TimeoutError: still running after ``timeout`` seconds (the job goes on).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            status = self.status()
            if follow:
                self._print_new_logs()
            if status in TERMINAL:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"job {self.job_id} is still {status} after {timeout:g} s; it keeps running")
            time.sleep(poll_s)
        if status == "FAILED":
            message = getattr(self.info(), "message", "") or ""
            raise TrainingJobError(f"job {self.job_id} failed: {message}\nlast log lines:\n{self.logs(tail=15)}")
        return status

    def _print_new_logs(self) -> None:
        text = self._raw_logs()
        new, self._shown = text[self._shown :], len(text)
        lines = [line for line in new.splitlines() if not line.startswith(METRICS_PREFIX)]
        if lines:
            cell.info("%s", "\n".join(lines))

    def stop(self, timeout: float = 60.0) -> str:
        """Stop the job (Ray signals its driver, which stops between phases) and wait until it ended; its status."""
        if self.status() not in TERMINAL:
            self.client.stop_job(self.job_id)
        deadline = time.monotonic() + timeout
        status = self.status()
        while status not in TERMINAL and time.monotonic() < deadline:
            time.sleep(0.5)
            status = self.status()
        return status

    # ------------------------------------------------------------------ display
    def _summary(self) -> str:
        rows = self.metrics()
        last = rows[-1] if rows else {}
        ret = last.get("episode_return_mean")
        ret_text = f", return {ret:.1f}" if isinstance(ret, (int, float)) else ""
        return f"{self.status()}, {len(rows)} iteration(s){ret_text}"

    def __repr__(self) -> str:
        try:
            return f"TrainingJob({self.job_id}: {self._summary()})"
        except Exception as err:  # noqa: BLE001 - a repr never raises (cluster gone)
            return f"TrainingJob({self.job_id}: status unavailable: {type(err).__name__})"
