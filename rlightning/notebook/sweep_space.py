"""A sweep's search space and options, checked as a whole before any trial starts.

Space keys are the dotted config paths the command line's overrides take (``policy.optim.lr``,
``env.num_envs``); values are Ray Tune domains (``tune.loguniform(1e-4, 1e-2)``, ``tune.choice``)
or plain lists (a grid). Each key and each value a domain can take at its ends is applied to the
config with `apply_overrides`, so an unknown key gets the closest valid name and a value outside a
field's range is refused with the config's own message.

    spec = check_sweep(cfg, {"policy.optim.lr": tune.loguniform(1e-4, 1e-2)}, scheduler="asha")
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Union

from rlightning.utils.config import ConfigError, MainConfig, apply_overrides

#: ``stop`` keys: run counters a trial reports every iteration (``iterations`` is the engine's ``iteration``).
STOP_COUNTERS = {"env_steps": "env_steps", "iterations": "iteration", "episodes": "episodes"}
#: Searchers by name (``optuna`` needs the ``optuna`` extra).
SEARCHERS = ("random", "grid", "optuna")
#: Trial schedulers by name (None: every trial runs to ``stop``).
SCHEDULERS = (None, "asha", "pbt")
#: Metrics every engine reports each iteration (the algorithm adds its own training metrics).
ENGINE_METRICS = (
    "episode_return_mean",
    "episode_return_last",
    "episode_length_mean",
    "episodes",
    "env_steps",
    "env_steps_per_sec",
    "iteration",
    "iteration_time",
)


@dataclass
class SweepSpec:
    """A checked sweep: the base config, Tune's parameter space and the options.

    Attributes:
        base: The config every trial starts from (a copy).
        space: Dotted config path -> Tune domain, ``tune.grid_search`` or constant.
        varied: The dotted paths the user varies (``seed`` included when ``seeds`` > 1).
        seeds: The seeds each setting runs with.
        metric: The reported metric trials are compared on.
        mode: ``"max"`` or ``"min"``.
        stop_key: The reported counter that ends a trial.
        stop_value: Its value at the end.
        live: For PBT: dotted path -> the ``run.set`` name it changes.
    """

    base: MainConfig
    space: Dict[str, Any]
    varied: List[str]
    seeds: List[int]
    metric: str
    mode: str
    stop_key: str
    stop_value: int
    live: Dict[str, str] = field(default_factory=dict)


def _tune():
    try:
        from ray import tune
    except ImportError:
        raise ImportError("lab.sweep needs Ray Tune: pip install 'rlightning[tune]'") from None
    return tune


def _ends(value: Any) -> List[Any]:
    """Values a domain (or grid list) can take that the config must accept: its ends, or every choice."""
    from ray.tune.search.sample import Categorical, Domain, Float, Integer

    if isinstance(value, dict) and set(value) == {"grid_search"}:
        value = value["grid_search"]
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, Categorical):
        return list(value.categories)
    if isinstance(value, Integer):
        return [value.lower, value.upper - 1]
    if isinstance(value, Float):
        return [value.lower, value.upper]
    if isinstance(value, Domain):
        raise TypeError(f"unsupported Tune domain {type(value).__name__}; use uniform/loguniform/randint/choice")
    return [value]


def _is_grid(value: Any) -> bool:
    return isinstance(value, (list, tuple)) or (isinstance(value, dict) and set(value) == {"grid_search"})


def _apply(cfg: MainConfig, key: str, value: Any) -> MainConfig:
    return apply_overrides(cfg, [f"{key}={json.dumps(value)}"])


def config_for(base: MainConfig, params: Dict[str, Any]) -> MainConfig:
    """``base`` with a trial's sampled values applied at their dotted paths (values checked by the config)."""
    cfg = base
    for key, value in params.items():
        cfg = _apply(cfg, key, value)
    return cfg


def live_name(cfg: MainConfig, key: str) -> Optional[str]:
    """The ``run.set`` name a dotted path changes on a built run (``policy.optim.lr`` -> ``lr``), else None."""
    from rlightning.notebook.live import OPTIM_SETTABLE, settable_hyperparameters

    parts = key.split(".")
    settable = settable_hyperparameters(cfg.policy)
    if len(parts) == 2 and parts[0] == "policy" and parts[1] in settable:
        return parts[1]
    if len(parts) == 3 and parts[:2] == ["policy", "optim"] and parts[2] in OPTIM_SETTABLE:
        return parts[2]
    return None


def _seed_list(cfg: MainConfig, seeds: Union[int, Sequence[int]]) -> List[int]:
    if isinstance(seeds, bool):
        raise TypeError(f"seeds must be a count >= 1 or a list of ints, got {seeds!r}")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ValueError(f"seeds must be >= 1 (the runs per setting), got {seeds}")
        return [cfg.seed + i for i in range(seeds)]
    out = list(seeds)
    if not out or not all(isinstance(s, int) and not isinstance(s, bool) for s in out):
        raise ValueError(f"seeds must be a count >= 1 or a non-empty list of ints, got {seeds!r}")
    return out


def check_sweep(
    cfg: MainConfig,
    space: Dict[str, Any],
    seeds: Union[int, Sequence[int]] = 1,
    num_samples: int = 1,
    search: str = "random",
    scheduler: Optional[str] = None,
    metric: str = "episode_return_mean",
    mode: str = "max",
    stop: Optional[Dict[str, int]] = None,
    allow_empty: bool = False,
) -> SweepSpec:
    """Check a whole sweep before any trial starts; returns its `SweepSpec`.

    Raises:
        ValueError: an empty space, a value out of its field's range, ``num_samples < 1``, an unknown
            search or scheduler, a ``stop`` key that is no counter, a bad ``mode``.
        KeyError: a key that is no config field (closest name given), or ``pbt`` over a key
            ``run.set`` cannot change (the settable ones listed).
        TypeError: a config that is no `MainConfig`, a space that is no dict.
    """
    tune = _tune()
    if not isinstance(cfg, MainConfig):
        raise TypeError(f"sweep expects a MainConfig (e.g. load_preset('cartpole_ppo')), got {type(cfg).__name__}")
    if not isinstance(space, dict):
        raise TypeError(
            f"space must be a dict of dotted config path -> Tune domain or list, got {type(space).__name__}"
        )
    if not space and not allow_empty:
        raise ValueError(
            "space is empty: give at least one dotted config path, e.g. "
            "{'policy.optim.lr': tune.loguniform(1e-4, 1e-2)} (lab.seeds runs one config over seeds)"
        )
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise ValueError(f"num_samples must be an int >= 1 (samples of the space), got {num_samples!r}")
    if search not in SEARCHERS:
        raise ValueError(f"search {search!r} is not one of {', '.join(SEARCHERS)}")
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler {scheduler!r} is not one of None, 'asha', 'pbt'")
    if mode not in ("max", "min"):
        raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
    stop = dict(stop or {"iterations": cfg.train.iterations})
    if len(stop) != 1:
        raise ValueError(f"stop takes one counter, e.g. {{'env_steps': 50000}}; got {stop!r}")
    ((stop_name, stop_value),) = stop.items()
    if stop_name not in STOP_COUNTERS:
        raise ValueError(f"stop key {stop_name!r} is not a counter; use one of {', '.join(STOP_COUNTERS)}")
    if isinstance(stop_value, bool) or not isinstance(stop_value, int) or stop_value < 1:
        raise ValueError(f"stop[{stop_name!r}] must be an int >= 1, got {stop_value!r}")
    seed_list = _seed_list(cfg, seeds)
    if "seed" in space and len(seed_list) > 1:
        raise ValueError("space has 'seed' and seeds > 1; vary the seed in one place only")

    base = cfg.model_copy(deep=True)
    for key, value in space.items():
        if not isinstance(key, str):
            raise TypeError(f"space keys are dotted config paths (str), got {key!r}")
        if search == "grid" and not _is_grid(value):
            raise ValueError(f"search='grid' needs a list of values for {key!r}, got {value!r}")
        for end in _ends(value):
            try:
                _apply(base, key, end)
            except ConfigError as err:
                raise type(err)(f"space[{key!r}] = {value!r}: {err}") from None

    live: Dict[str, str] = {}
    if scheduler == "pbt":
        from rlightning.notebook.live import settable_hyperparameters

        for key in space:
            name = live_name(base, key)
            if name is None:
                settable = settable_hyperparameters(base.policy)
                raise KeyError(
                    f"scheduler='pbt' perturbs hyperparameters run.set changes live; {key!r} is not one of them "
                    f"(settable: {', '.join('policy.optim.lr' if n == 'lr' else 'policy.' + n for n in settable)})"
                )
            live[key] = name
    if search == "optuna" and any(_is_grid(v) for v in space.values()):
        raise ValueError("search='optuna' samples domains; give tune.choice([...]) instead of lists")

    tune_space: Dict[str, Any] = {}
    for key, value in space.items():
        if isinstance(value, (list, tuple)):
            value = tune.choice(list(value)) if search == "optuna" else tune.grid_search(list(value))
        tune_space[key] = value
    varied = list(space)
    if len(seed_list) > 1:
        if search == "optuna":
            raise ValueError("search='optuna' runs one seed per sample; use seeds=1 (or lab.seeds on the best config)")
        tune_space["seed"] = tune.grid_search(seed_list)
        varied.append("seed")
    elif "seed" not in space:
        tune_space["seed"] = seed_list[0]
    return SweepSpec(
        base=base,
        space=tune_space,
        varied=varied,
        seeds=seed_list,
        metric=metric,
        mode=mode,
        stop_key=STOP_COUNTERS[stop_name],
        stop_value=int(stop_value),
        live=live,
    )


#: Tune domains a space file may name: ``{loguniform: [1e-4, 1e-2]}``, ``{choice: [a, b]}``, ...
FILE_DOMAINS = ("uniform", "loguniform", "randint", "choice", "grid")


def space_from_dict(data: Any, source: str = "space") -> Dict[str, Any]:
    """A space from plain data (a YAML file): each dotted key maps to a list (a grid) or one
    ``{domain: arguments}`` of `FILE_DOMAINS` (``{loguniform: [1e-4, 1e-2]}``, ``{choice: [64, 128]}``).

    Raises:
        ValueError: not a mapping, or an entry that is no list and no known domain (the valid ones named).
    """
    tune = _tune()
    if not isinstance(data, dict):
        raise ValueError(f"{source} must map dotted config paths to lists or domains, got {type(data).__name__}")
    out: Dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, list):
            out[key] = value
            continue
        if not (isinstance(value, dict) and len(value) == 1 and next(iter(value)) in FILE_DOMAINS):
            raise ValueError(
                f"{source}[{key!r}] = {value!r}: give a list (a grid) or one of "
                f"{', '.join('{' + d + ': [...]}' for d in FILE_DOMAINS)}"
            )
        ((kind, args),) = value.items()
        if not isinstance(args, list) or (kind in ("uniform", "loguniform", "randint") and len(args) != 2):
            raise ValueError(f"{source}[{key!r}]: {kind} takes a list [low, high], got {args!r}")
        out[key] = (
            tune.grid_search(args)
            if kind == "grid"
            else (getattr(tune, kind)(args) if kind == "choice" else getattr(tune, kind)(*args))
        )
    return out


def check_metric(spec: SweepSpec, reported: Optional[Sequence[str]] = None) -> None:
    """Refuse a metric the run never reports; ``reported`` defaults to a one-iteration probe in this process.

    Metrics every engine reports pass without a probe.

    Raises:
        ValueError: the metric is not reported (the message lists those that are).
    """
    if spec.metric in ENGINE_METRICS:
        return
    if reported is None:
        reported = probe_metrics(spec.base)
    if spec.metric not in reported:
        names = ", ".join(sorted({*ENGINE_METRICS, *reported} - {"time"}))
        raise ValueError(f"metric {spec.metric!r} is never reported by this run; it reports: {names}")


def probe_metrics(cfg: MainConfig) -> List[str]:
    """The metric names one iteration of ``cfg`` reports, run in this process (no Ray actors, one env worker)."""
    import tempfile

    from rlightning.utils.builders import build_run

    probe = cfg.model_copy(deep=True)
    probe.cluster.remote_env = False
    probe.cluster.remote_eval = False
    probe.cluster.remote_train = False
    probe.cluster.remote_storage = False
    probe.env.num_workers = 1
    probe.train.eval_interval = 0
    with tempfile.TemporaryDirectory() as tmp:
        probe.log.run_dir = tmp
        probe.log.jsonl = False
        probe.log.tensorboard = False
        probe.log.mlflow = probe.log.wandb = False
        parts = build_run(probe)
        try:
            return sorted(parts.engine.step())
        finally:
            parts.engine.close()
