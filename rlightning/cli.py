"""The ``rlightning`` command line: train, eval, export, sweep, presets, config, selfcheck.

Exit codes: 0 on success; 2 for bad input, with one line ``rlightning: error: ...``
on stderr and no traceback; 130 when interrupted. Bad input is an unknown
subcommand or option (argparse exits with 2 and its usage message), an
unknown preset or config key, a malformed ``key=value`` override, a value of
the wrong type or out of range, an unreadable config file or checkpoint
(`rlightning.utils.config.ConfigError`, `rlightning.engine.checkpoint.CheckpointError`,
any ``KeyError``, ``ValueError``, ``TypeError`` or ``OSError`` they lead to).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from importlib import resources
from pathlib import Path
from typing import List, Optional, Sequence

from rlightning.utils.config import MainConfig, apply_overrides, list_presets, load_config, load_preset, to_yaml

EXIT_USAGE = 2


def _load(target: str, overrides: Sequence[str]) -> MainConfig:
    path = Path(target)
    if target.endswith((".yaml", ".yml")) or path.is_file():
        cfg = load_config(path)
    else:
        cfg = load_preset(target)
    return apply_overrides(cfg, list(overrides))


def _preset_summary(name: str) -> str:
    text = (resources.files("rlightning") / "presets" / f"{name}.yaml").read_text()
    for line in text.splitlines():
        if line.startswith("#"):
            return line.lstrip("# ").strip()
    return ""


def cmd_presets(args: argparse.Namespace) -> int:
    for name in list_presets():
        print(f"{name:24s} {_preset_summary(name)}")
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    from rlightning.utils.validate import validate_config

    cfg = _load(args.target, args.overrides)
    validate_config(cfg)  # the printed config is one `train` accepts
    print(to_yaml(cfg), end="")
    return 0


def _start_ray(cfg: MainConfig) -> bool:
    c = cfg.cluster
    if c.address is None and not (c.remote_env or c.remote_eval or c.remote_train or c.remote_storage):
        return False
    from rlightning.utils.ray.runtime import acquire_ray

    kwargs = {}
    if c.address is None:
        kwargs = {
            "num_cpus": c.num_cpus,
            "num_gpus": c.num_gpus,
            "include_dashboard": c.include_dashboard,
            "dashboard_host": c.dashboard_host,
        }
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
    acquire_ray(c.address, namespace=c.namespace, log_to_driver=False, **kwargs)
    return True


def _summary(engine, history: List[dict], seconds: float) -> str:
    last = history[-1] if history else engine.last_metrics
    ret = last.get("episode_return_mean")
    lines = [
        f"iterations      {engine.iteration}",
        f"env steps       {engine.env_steps}",
        f"episodes        {engine.episodes}",
        f"mean return     {ret:.1f}" if isinstance(ret, (int, float)) else "mean return     n/a",
        f"wall time       {seconds:.1f} s",
        f"env steps/s     {engine.env_steps / seconds:.0f}" if seconds > 0 else "",
        f"run dir         {engine.run_dir}",
    ]
    if engine.last_checkpoint is not None:
        lines.append(f"checkpoint      {engine.last_checkpoint}")
    return "\n".join(line for line in lines if line)


def _print_metrics(engine, metrics: dict) -> None:
    """``--metrics-lines``: one ``rlightning-metrics {json}`` line per iteration (what `TrainingJob.metrics` reads)."""
    row = engine.metrics.history[-1] if engine.metrics.history else metrics
    print(f"rlightning-metrics {json.dumps(row)}", flush=True)


def _terminate_as_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt  # a stopped Ray Job (SIGTERM) ends like Ctrl-C: workers closed, Ray released


def cmd_train(args: argparse.Namespace) -> int:
    if threading.current_thread() is not threading.main_thread():
        return _train(args)
    previous = signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        return _train(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _train(args: argparse.Namespace) -> int:
    if args.resume and args.target and "=" in args.target and not Path(args.target).exists():
        args.overrides, args.target = [args.target, *args.overrides], None  # `--resume DIR key=value`: no TARGET
    if not args.target and not args.resume:
        raise ValueError("train needs a TARGET (a preset name or a YAML config), or --resume RUN_DIR")
    cfg = _resume_config(args) if args.resume else _load(args.target, args.overrides)
    if args.run_dir:
        cfg.log.run_dir = args.run_dir
    if args.resume:  # the resumed run writes on into its folder
        cfg.log.run_dir, cfg.log.name = str(Path(args.resume).parent), Path(args.resume).name
    if args.quiet:
        cfg.log.progress = False
    from rlightning.utils.builders import build_run
    from rlightning.utils.logger import set_level
    from rlightning.utils.validate import validate_config

    set_level(cfg.log.level if not args.quiet else "WARNING")
    validate_config(cfg)  # before Ray starts: a bad config fails in a second
    started = _start_ray(cfg)
    engine = None
    try:
        engine = build_run(cfg).engine
        if args.resume and args.target and not _has_checkpoint(args.resume):
            print(f"no complete checkpoint in {args.resume} yet: starting {args.target} there")
        elif args.resume:
            print(f"resuming from {engine.resume(args.resume)} (iteration {engine.iteration})")
        if not started:
            place = "in this process"
        else:
            place = (
                f"on the Ray cluster at {cfg.cluster.address!r}" if cfg.cluster.address else "on a local Ray runtime"
            )
        print(f"training {args.target or args.resume} ({cfg.engine}, {cfg.policy.type} on {cfg.env.name}) {place}")
        t0 = time.perf_counter()
        history = engine.run(callbacks=[_print_metrics] if args.metrics_lines else ())
        seconds = time.perf_counter() - t0
        engine.save()
        print(_summary(engine, history, seconds))
        if args.json:
            print(json.dumps(engine.last_metrics))
    finally:
        if engine is not None:
            engine.close()
        if started:
            from rlightning.utils.ray.runtime import release_ray

            release_ray()
    return 0


def _has_checkpoint(run_dir: str) -> bool:
    from rlightning.engine.checkpoint import FORMAT_VERSION
    from rlightning.engine.checkpoint_store import newest_checkpoint

    return newest_checkpoint(run_dir, FORMAT_VERSION) is not None


def _resume_config(args: argparse.Namespace) -> MainConfig:
    """``train --resume RUN_DIR``: the config of the run's newest complete checkpoint (or of TARGET when given),
    with the overrides."""
    if args.target:
        return _load(args.target, args.overrides)
    from rlightning.engine.checkpoint import FORMAT_VERSION, load_engine_files
    from rlightning.engine.checkpoint_store import newest_checkpoint

    info = newest_checkpoint(args.resume, FORMAT_VERSION)
    if info is None:
        raise FileNotFoundError(f"--resume {args.resume!r}: no complete checkpoint (iter_* under checkpoints/) there")
    _, cfg = load_engine_files(info.path)
    return apply_overrides(cfg, list(args.overrides))


def cmd_eval(args: argparse.Namespace) -> int:
    from rlightning.engine.checkpoint import load_engine_files

    state, cfg = load_engine_files(Path(args.checkpoint))
    cfg = apply_overrides(cfg, list(args.overrides) + ["engine=eval", "log.progress=false"])
    cfg.cluster.remote_env = cfg.cluster.remote_eval = cfg.cluster.remote_train = cfg.cluster.remote_storage = False
    cfg.cluster.train_worker_num = 1
    cfg.train.eval_episodes = args.episodes
    from rlightning.utils.builders import build_run

    engine = build_run(cfg).engine
    try:
        engine.policy_group.load_checkpoint(str(Path(args.checkpoint) / "policy.pt"))
        engine.policy_group.sync_weights()
        result = engine.evaluate(args.episodes)
    finally:
        engine.close()
    print(f"checkpoint      {args.checkpoint} (iteration {state['iteration']}, {state['env_steps']} env steps)")
    print(f"episodes        {result['episodes']}")
    print(
        f"return          {result['return_mean']:.1f} +- {result['return_std']:.1f} "
        f"(min {result['return_min']:.1f}, max {result['return_max']:.1f})"
    )
    print(f"length          {result['length_mean']:.1f}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from rlightning.policy.acting_net import ActingNet
    from rlightning.policy.export import EXPORT_SUFFIXES, check_format
    from rlightning.policy.standalone import load_policy

    check_format(args.format)  # before the checkpoint is read
    output = Path(args.output) if args.output else Path(Path(args.checkpoint).name + EXPORT_SUFFIXES[args.format])
    policy = load_policy(args.checkpoint)
    try:
        path = policy.export(output, format=args.format, action_mask=args.action_mask)
    except ImportError as err:  # the export extra is missing: one line naming it, exit 2
        raise ValueError(str(err)) from None
    net = ActingNet(policy.policy, masked=args.action_mask)
    print(f"exported {args.checkpoint} ({policy.config.policy.type} on {policy.config.env.name}) to {path}")
    print(f"inputs          {', '.join(net.input_names)}")
    print(f"outputs         {', '.join(net.output_names)}")
    return 0


def cmd_dataset_collect(args: argparse.Namespace) -> int:
    from rlightning.datasets.collect import collect_dataset
    from rlightning.policy.standalone import load_policy

    policy = load_policy(args.checkpoint)
    ref_max: object = args.ref_max_score
    if ref_max not in (None, "policy"):
        try:
            ref_max = float(ref_max)
        except ValueError:
            raise ValueError(f"--ref-max-score takes a number or 'policy', got {args.ref_max_score!r}") from None
    info = collect_dataset(
        policy,
        policy.config,
        args.output,
        episodes=args.episodes,
        deterministic=args.deterministic,
        noise=args.noise,
        seed=args.seed,
        ref_max_score=ref_max,
        overwrite=args.overwrite,
    )
    print(f"dataset         {info.path} (id {info.dataset_id})")
    print(f"episodes        {info.total_episodes} ({info.total_steps} steps)")
    print(f"return          {info.return_mean:.1f} (mean over the episodes)")
    ref = f"random {info.ref_min_score:.1f}" if info.ref_min_score is not None else "random: not measured"
    if info.ref_max_score is not None:
        ref += f", expert {info.ref_max_score:.1f}"
    print(f"reference       {ref}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    import yaml

    from rlightning.notebook.sweep import start_sweep
    from rlightning.notebook.sweep_space import space_from_dict
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    cfg = _load(args.target, args.overrides)
    cfg.log.progress = False
    with open(args.space, encoding="utf-8") as f:
        space = space_from_dict(yaml.safe_load(f), source=f"space file {args.space!r}")
    stop = {"env_steps": args.env_steps} if args.env_steps else {"iterations": args.iterations or cfg.train.iterations}
    c = cfg.cluster
    kwargs = {k: v for k, v in {"num_cpus": c.num_cpus, "num_gpus": c.num_gpus}.items() if v is not None}
    acquire_ray(c.address, namespace=c.namespace, log_to_driver=False, **({} if c.address else kwargs))
    try:
        exp = start_sweep(
            cfg,
            space,
            seeds=args.seeds,
            num_samples=args.samples,
            search=args.search,
            scheduler=args.scheduler,
            metric=args.metric,
            mode=args.mode,
            stop=stop,
            max_concurrent=args.max_concurrent,
            name=args.name,
            resume=args.resume,
        )
        exp.wait()
        df = exp.results_df()
        print(df.drop(columns=["error"] if df["error"].isna().all() else []).to_string(index=False))
        print(f"\nbest trial {exp.best_trial()} ({args.metric}, {args.mode}); its config:\n")
        print(yaml.safe_dump(exp.best_config().model_dump(mode="json"), sort_keys=False), end="")
    finally:
        release_ray()
    return 0


def cmd_selfcheck(args: argparse.Namespace) -> int:
    from rlightning.selfcheck import run_selfcheck

    return run_selfcheck(print)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rlightning",
        description="Distributed reinforcement learning on Ray: train presets or configs, evaluate checkpoints.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("train", help="train a preset or a config file")
    p.add_argument(
        "target",
        nargs="?",
        help="preset name (see `rlightning presets`) or path to a YAML config (optional with --resume)",
    )
    p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. train.iterations=50 policy.optim.lr=1e-3")
    p.add_argument("--run-dir", help="folder for metrics and checkpoints (default: log.run_dir)")
    p.add_argument(
        "--resume",
        metavar="RUN_DIR",
        help="continue the run in RUN_DIR from its newest complete checkpoint (its config unless TARGET is given; "
        "with TARGET and no checkpoint yet, start TARGET there)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
    p.add_argument("--json", action="store_true", help="also print the last metrics as JSON")
    p.add_argument(
        "--metrics-lines",
        action="store_true",
        help="print each iteration's metrics as a line 'rlightning-metrics {json}'",
    )
    p.set_defaults(func=cmd_train)

    p = sub.add_parser("eval", help="evaluate a checkpoint with deterministic actions")
    p.add_argument("checkpoint", help="checkpoint folder written by train")
    p.add_argument("overrides", nargs="*", help="dotted overrides")
    p.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("export", help="export a checkpoint's policy (deterministic acting) to ONNX or TorchScript")
    p.add_argument("checkpoint", help="checkpoint folder written by train")
    p.add_argument("--format", default="onnx", help="onnx (default) or torchscript")
    p.add_argument("--output", help="file to write (default: <checkpoint folder name>.onnx / .pt here)")
    p.add_argument("--action-mask", action="store_true", help="give the model an action_mask input (discrete)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("sweep", help="run a preset or config over a search space as Ray Tune trials")
    p.add_argument("target", help="preset name or path to a YAML config")
    p.add_argument("overrides", nargs="*", help="dotted overrides of the base config")
    p.add_argument("--space", required=True, help="YAML: dotted config path -> list or {loguniform: [lo, hi]}, ...")
    p.add_argument("--samples", type=int, default=1, help="samples of the space (default 1; grids run whole)")
    p.add_argument("--seeds", type=int, default=1, help="seeds per setting (default 1)")
    p.add_argument("--search", default="random", help="random (default), grid or optuna")
    p.add_argument("--scheduler", default=None, help="asha or pbt (default: none, every trial runs to the end)")
    p.add_argument("--metric", default="episode_return_mean", help="metric trials are compared on")
    p.add_argument("--mode", default="max", help="max (default) or min")
    p.add_argument("--iterations", type=int, help="iterations per trial (default train.iterations)")
    p.add_argument("--env-steps", type=int, help="env steps per trial (instead of iterations)")
    p.add_argument("--max-concurrent", type=int, help="trials at once (default: as many as fit)")
    p.add_argument("--name", help="the sweep's folder name under <log.run_dir>/sweeps")
    p.add_argument("--resume", action="store_true", help="continue the sweep NAME without re-running finished trials")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("dataset", help="offline datasets (Minari): collect one from a checkpoint")
    dsub = p.add_subparsers(dest="dataset_command", metavar="ACTION", required=True)
    p = dsub.add_parser("collect", help="play a checkpoint's policy and write the episodes as a Minari dataset")
    p.add_argument("checkpoint", help="checkpoint folder written by train")
    p.add_argument("output", help="dataset folder, or a Minari id such as pendulum/medium-v0")
    p.add_argument("--episodes", type=int, default=10, help="episodes to play (default 10)")
    p.add_argument("--deterministic", action="store_true", help="the policy's most likely actions (default: sampled)")
    p.add_argument("--noise", type=float, default=0.0, help="exploration: Box half-range fraction / epsilon")
    p.add_argument("--seed", type=int, default=None, help="seed of the env resets and the noise (default: config)")
    p.add_argument("--ref-max-score", default=None, help="the expert's mean return, or 'policy' (this policy's)")
    p.add_argument("--overwrite", action="store_true", help="replace a dataset already there")
    p.set_defaults(func=cmd_dataset_collect)

    p = sub.add_parser("presets", help="list the packaged presets")
    p.set_defaults(func=cmd_presets)

    p = sub.add_parser("config", help="print a preset or config (with overrides) as YAML")
    p.add_argument("target")
    p.add_argument("overrides", nargs="*")
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("selfcheck", help="check the installation: torch, gymnasium, Ray actors")
    p.set_defaults(func=cmd_selfcheck)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    if getattr(args, "episodes", 1) is not None and getattr(args, "episodes", 1) < 1:
        print(f"rlightning: error: --episodes must be >= 1, got {args.episodes}", file=sys.stderr)
        return EXIT_USAGE
    from rlightning.env.suites import MissingSuiteError

    try:
        return int(args.func(args) or 0)
    except (KeyError, ValueError, TypeError, OSError, MissingSuiteError) as err:  # a missing suite names its extra
        msg = err.args[0] if isinstance(err, KeyError) and err.args else str(err)
        print(f"rlightning: error: {msg}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("rlightning: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
