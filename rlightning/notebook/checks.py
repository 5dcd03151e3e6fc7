"""Checks `Lab.build` runs before any worker starts: the whole config, and the resources it asks for."""

from __future__ import annotations

from typing import Dict, List

from rlightning.utils.config import ConfigError, MainConfig, UnknownNameError


def check_config(cfg: MainConfig) -> None:
    """Validate the whole config, the env id included (with close matches), without starting a worker.

    Raises:
        UnknownNameError: an unknown env id, engine, policy or buffer (a ``KeyError`` too).
        ConfigError: parts that do not fit together.
    """
    from rlightning.utils.registry import ENVS
    from rlightning.utils.validate import validate_config

    # A name registered in ENVS is its own backend (as the env group resolves it); else a gymnasium id.
    if cfg.env.backend == "gymnasium" and not (cfg.env.name in ENVS and cfg.env.name != "gymnasium"):
        from rlightning.env.gym_env import resolve_env_spec

        try:
            resolve_env_spec(cfg.env.name)
        except KeyError as err:
            raise UnknownNameError(f"env.name: {err.args[0] if err.args else err}") from None
    try:
        validate_config(cfg)
    except ConfigError as err:
        raise type(err)(str(err)) from None  # one message, not the validator's frames


def _parts(cfg: MainConfig) -> List[tuple]:
    """(what, count, CPUs each, GPUs each) for every part the config places on Ray actors."""
    c, e = cfg.cluster, cfg.env
    parts = []
    if c.remote_env:
        parts.append(("env workers", e.num_workers, float(e.num_cpus), float(getattr(e, "num_gpus", 0.0) or 0.0)))
    if c.remote_eval and c.eval_worker_num and not c.is_colocated:
        parts.append(("eval workers", c.eval_worker_num, c.eval_each_cpu_num, c.eval_each_gpu_num))
    if c.remote_train:
        parts.append(("train workers", c.train_worker_num, c.train_each_cpu_num, c.train_each_gpu_num))
    if c.remote_storage:
        parts.append(("storage shards", c.buffer_worker_num, c.buffer_each_cpu_num, 0.0))
    return parts


def actor_resources(cfg: MainConfig) -> Dict[str, float]:
    """CPUs and GPUs the config's Ray actors reserve in all."""
    parts = _parts(cfg)
    return {
        "CPU": sum(n * cpu for _, n, cpu, _ in parts),
        "GPU": sum(n * gpu for _, n, _, gpu in parts),
    }


def describe_need(cfg: MainConfig, kind: str) -> str:
    """``"2 env workers x 1, 1 train workers x 1"``: where the CPUs (or GPUs) go."""
    index = 2 if kind == "CPU" else 3
    bits = [f"{p[1]} {p[0]} x {p[index]:g}" for p in _parts(cfg) if p[1] * p[index] > 0]
    return ", ".join(bits) or "none"
