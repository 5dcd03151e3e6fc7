"""`Lab.sweep` and `Lab.seeds`: many runs as Ray Tune trials on the Lab's cluster.

Each trial is an ordinary run (`rlightning.notebook.trial.run_trial`) in a placement group of its
own, sized from its config; ASHA and PBT are Tune's schedulers, Optuna is Tune's `OptunaSearch`.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any, Dict, Optional, Sequence, Union

from rlightning.notebook.errors import ResourceError
from rlightning.notebook.experiment import Experiment
from rlightning.notebook.sweep_space import SweepSpec, check_metric, check_sweep, config_for
from rlightning.notebook.trial import run_trial, trial_bundles, trial_resources
from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)


def _fit_check(spec: SweepSpec) -> None:
    """Fail at once when one trial's placement group cannot fit on the cluster (Tune would wait forever)."""
    import ray

    from rlightning.notebook.sweep_space import _ends

    total = ray.cluster_resources()
    configs = [spec.base]
    for key, value in spec.space.items():
        for end in _ends(value):
            configs.append(config_for(spec.base, {key: end}))
    for cfg in configs:
        bundles = trial_bundles(cfg)
        for kind in ("CPU", "GPU"):
            need = sum(b.get(kind, 0.0) for b in bundles)
            have = float(total.get(kind, 0.0))
            if need > have + 1e-9:
                raise ResourceError(
                    f"a trial needs {need:g} {kind}s (its process and its Ray actors: {bundles}) but the cluster has "
                    f"{have:g}; lower the workers' {kind}s (env.num_cpus, cluster.*_each_{kind.lower()}_num) or "
                    "worker counts, or use a bigger cluster"
                )


def _scheduler(spec: SweepSpec, scheduler: Optional[str], options: Dict[str, Any], mutations: Dict[str, Any]) -> Any:
    if scheduler is None:
        return None
    from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

    if scheduler == "asha":
        opts = {"grace_period": max(1, spec.stop_value // 8), "reduction_factor": 2, **options}
        return ASHAScheduler(time_attr=spec.stop_key, max_t=spec.stop_value, **opts)
    opts = {"perturbation_interval": max(1, spec.stop_value // 4), **options}
    return PopulationBasedTraining(time_attr=spec.stop_key, hyperparam_mutations=mutations, **opts)


def _silent_reporter() -> Any:
    """A Tune progress reporter that reports nothing.

    In a notebook Tune's default (its ``JupyterNotebookReporter``) calls ``clear_output`` on the cell that
    runs while the sweep goes, which erased ``exp.show()``'s view from the cell that started the sweep.
    """
    from ray.tune import ProgressReporter

    class _Silent(ProgressReporter):
        def should_report(self, trials: Any, done: bool = False) -> bool:
            return False

        def report(self, trials: Any, done: bool, *sys_info: str) -> None:
            return None

    return _Silent()


def _searcher(search: str, max_concurrent: Optional[int]) -> Any:
    if search != "optuna":
        return None
    try:
        import optuna  # noqa: F401 - OptunaSearch fails later without it
        from ray.tune.search.optuna import OptunaSearch
    except ImportError:
        raise ImportError("search='optuna' needs Optuna: pip install 'rlightning[optuna]'") from None
    return OptunaSearch()


def sweep_folder(cfg: MainConfig, name: str) -> Path:
    """Where a sweep's trials write: ``<log.run_dir>/sweeps/<name>`` (the notebook's run folder by default)."""
    from rlightning.notebook.lab import notebook_run_dir
    from rlightning.utils.config import LogConfig

    root = notebook_run_dir() if cfg.log.run_dir == LogConfig().run_dir else Path(cfg.log.run_dir)
    return root.expanduser().resolve() / "sweeps" / name


def start_sweep(
    cfg: MainConfig,
    space: Dict[str, Any],
    seeds: Union[int, Sequence[int]] = 1,
    num_samples: int = 1,
    search: str = "random",
    scheduler: Optional[str] = None,
    metric: str = "episode_return_mean",
    mode: str = "max",
    stop: Optional[Dict[str, int]] = None,
    max_concurrent: Optional[int] = None,
    name: Optional[str] = None,
    resume: bool = False,
    max_failures: int = 0,
    checkpoint_every: Optional[int] = None,
    scheduler_options: Optional[Dict[str, Any]] = None,
    allow_empty: bool = False,
) -> Experiment:
    """Check the whole sweep, then start its trials in a background thread; returns the `Experiment`.

    Args:
        cfg: The base config.
        space: Dotted config path (as the command line's overrides) -> Tune domain
            (``tune.loguniform(1e-4, 1e-2)``, ``tune.choice([...])``) or a list (a grid).
        seeds: Seeds per setting (a count from ``cfg.seed`` on, or a list): a grid over ``seed``.
        num_samples: Samples of the space (a grid runs whole each time).
        search: ``"random"``, ``"grid"`` or ``"optuna"`` (Tune's `OptunaSearch`).
        scheduler: None, ``"asha"`` (stops bad trials early) or ``"pbt"`` (exploit and explore).
        metric: The reported metric trials are compared on; ``mode``: ``"max"`` or ``"min"``.
        stop: ``{"env_steps": n}``, ``{"iterations": n}`` or ``{"episodes": n}`` (default train.iterations).
        max_concurrent: Trials at once (default: as many as fit).
        name: The sweep's folder under ``<log.run_dir>/sweeps`` (default: by time).
        resume: Continue the sweep of that name; finished trials are not run again.
        max_failures: Retries of a failed trial from its last checkpoint.
        checkpoint_every: Iterations between checkpoints (PBT default 1, else train.checkpoint_interval or 10).
        scheduler_options: Passed to Tune's scheduler (``grace_period``, ``reduction_factor``,
            ``perturbation_interval``, ``quantile_fraction``, ``synch``, ...).
        allow_empty: Accept an empty space (`Lab.seeds`).

    Raises:
        ValueError / KeyError / TypeError: a bad space or option, before any trial starts.
        ResourceError: one trial needs more CPUs/GPUs than the cluster has.
    """
    import logging
    import os

    from ray import tune

    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")  # with verbose=0: no Tune tables in the cell or terminal
    # Tune's own notes (where it wrote its state, checkpoint-snapshot frequency) would land in whichever cell
    # runs when they come; the trials' statuses and errors are in the Experiment (results_df, show()).
    logging.getLogger("ray.tune").setLevel(logging.ERROR)
    spec = check_sweep(cfg, space, seeds, num_samples, search, scheduler, metric, mode, stop, allow_empty)
    check_metric(spec)
    _fit_check(spec)
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < 0:
        raise ValueError(f"max_failures must be an int >= 0 (retries of a failed trial), got {max_failures!r}")
    if max_concurrent is not None and (
        isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int) or max_concurrent < 1
    ):
        raise ValueError(f"max_concurrent must be None or an int >= 1, got {max_concurrent!r}")
    if checkpoint_every is None:
        checkpoint_every = 1 if scheduler == "pbt" else max(1, cfg.train.checkpoint_interval or 10)
    name = name or f"sweep-{time.strftime('%Y%m%d-%H%M%S')}"
    path = sweep_folder(cfg, name)
    if spec.base.log.mlflow or spec.base.log.wandb:  # one tracker run per trial, grouped by the sweep
        from rlightning.utils.tracking import prepare_tracking

        spec.base.log.group = spec.base.log.group or name
        spec.base = prepare_tracking(spec.base)
    base = spec.base.model_dump(mode="json")

    trainable = tune.with_parameters(
        run_trial,
        base=base,
        stop_key=spec.stop_key,
        stop_value=spec.stop_value,
        live=spec.live,
        checkpoint_every=checkpoint_every,
        folder=str(path),
    )
    trainable = tune.with_resources(trainable, functools.partial(trial_resources, base, tuple(spec.space)))
    mutations = {k: space[k] for k in spec.live}

    def make_tuner(callbacks: list, stopper: Any) -> Any:
        run_config = tune.RunConfig(
            name=name,
            storage_path=str(path.parent),
            stop=stopper,
            failure_config=tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=tune.CheckpointConfig(num_to_keep=8 if scheduler == "pbt" else 2),  # PBT donors' too
            callbacks=callbacks,
            verbose=0,
            progress_reporter=_silent_reporter(),  # the trials' state is the Experiment's (results_df, show())
        )
        if resume and tune.Tuner.can_restore(str(path)):
            logger.info("sweep %r: resuming from %s (finished trials are kept)", name, path)
            tuner = tune.Tuner.restore(str(path), trainable, resume_unfinished=True, resume_errored=True)
            tuner._local_tuner._run_config.callbacks = callbacks  # noqa: SLF001 - the restored run keeps old ones
            tuner._local_tuner._run_config.stop = stopper  # noqa: SLF001
            return tuner
        tune_config = tune.TuneConfig(
            metric=spec.metric,
            mode=spec.mode,
            scheduler=_scheduler(spec, scheduler, dict(scheduler_options or {}), mutations),
            search_alg=_searcher(search, max_concurrent),
            num_samples=num_samples,
            max_concurrent_trials=max_concurrent,
            # A trial actor whose trial ended takes the next trial of the same resources: its process has
            # Ray Tune, torch and rlightning imported already (seconds per trial on a small machine).
            reuse_actors=True,
        )
        return tune.Tuner(trainable, param_space=dict(spec.space), tune_config=tune_config, run_config=run_config)

    logger.info("sweep %r: %s over %s, trials write to %s", name, search, spec.varied or "seeds", path)
    return Experiment(spec, path, make_tuner).start()
