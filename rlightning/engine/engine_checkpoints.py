"""What an engine's checkpoint holds, and how it is written, restored and found (`BaseEngine.save` / ``load``
/ ``resume`` call these).

A checkpoint folder (written atomically, `rlightning.engine.checkpoint_store`) holds the policy group's
checkpoint (weights, optimizers, counters and schedules), the buffer's samplers' generator states, the
engine's counters and metric history, the env group's statistics and its policy copies' generator states,
the train and eval workers' generator states and acting counters (a Ray worker's process generators too),
the torch / numpy / python RNG states, and, when asked, the stored data (`rlightning.engine.checkpoint`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Union

import torch

from rlightning.engine.checkpoint import (
    FORMAT_VERSION,
    load_buffer_data,
    load_engine_files,
    save_buffer_data,
    save_engine_files,
)
from rlightning.engine.checkpoint_store import atomic_folder, newest_checkpoint, prune_checkpoints
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["checkpoint_state", "newest_complete", "periodic_checkpoint", "restore_checkpoint", "write_checkpoint"]

BUFFER_RNG = "buffer_rng.pt"
WORKERS_RNG = "workers_rng.pt"


def checkpoint_state(engine: Any) -> Dict[str, Any]:
    """The counters, metric history and env statistics of ``engine`` that ``engine.json`` holds."""
    history = engine.metrics.history
    last = history[-1] if history else {}
    evaluated = last.get("eval_return_mean") if last.get("iteration") == engine.iteration else None
    snapshot = getattr(engine.env_group, "stats_state_with_rng", None)
    return {
        "engine": engine.name,
        "iteration": engine.iteration,
        "env_steps": engine.env_steps,
        "episodes": engine.episodes,
        "weight_version": int(engine.policy_group.weight_version),
        "eval_return": evaluated,
        "env_stats": snapshot() if snapshot is not None else None,
        "metrics": history[-10_000:],
    }


def _policy_workers(engine: Any) -> Dict[str, List[Any]]:
    group = engine.policy_group
    return {role: list(getattr(group, f"{role}_workers", None) or []) for role in ("train", "eval")}


def workers_rng_state(engine: Any) -> Dict[str, List[Any]]:
    """Each train and eval worker's `BasePolicy.rng_state` (a Ray worker's with its process's generators); None
    for a worker that did not answer (it died: a resumed run's draws for it differ, nothing else)."""
    out: Dict[str, List[Any]] = {}
    for role, handles in _policy_workers(engine).items():
        out[role] = []
        for handle in handles:
            try:
                out[role].append(handle.call("rng_state", bool(handle.is_remote)))
            except Exception as err:  # noqa: BLE001 - a checkpoint is not lost for one worker's generators
                logger.warning("checkpoint: %s worker's generator state not saved (%r)", role, err)
                out[role].append(None)
    return out


def set_workers_rng_state(engine: Any, states: Dict[str, List[Any]]) -> None:
    """Restore `workers_rng_state` into workers of the same roles (a role with another worker count is skipped)."""
    for role, handles in _policy_workers(engine).items():
        saved = states.get(role) or []
        if len(saved) != len(handles):
            logger.warning(
                "resume: %d %s worker(s) saved, %d now: their generators start afresh", len(saved), role, len(handles)
            )
            continue
        for handle, state in zip(handles, saved):
            if state is not None:
                handle.call("set_rng_state", state)


def write_checkpoint(engine: Any, target: Path, include_buffer: bool = False) -> None:
    """Write ``engine``'s checkpoint folder at ``target`` atomically (complete or absent)."""
    with atomic_folder(target) as tmp:
        engine.policy_group.save_checkpoint(str(tmp / "policy.pt"))
        if include_buffer:
            save_buffer_data(tmp, engine.buffer.get_data())
        if hasattr(engine.buffer, "rng_states"):  # the samplers' generators: a resumed run draws the same batches
            torch.save(engine.buffer.rng_states(), tmp / BUFFER_RNG)
        torch.save(workers_rng_state(engine), tmp / WORKERS_RNG)  # exploration and acting draws, schedules
        save_engine_files(tmp, engine.state(), engine.config)


def periodic_checkpoint(engine: Any) -> None:
    """``train.checkpoint_interval``: save (with the buffer's data when ``train.checkpoint_buffer``), prune to
    ``train.keep_checkpoints`` (keeping the best by eval return with ``train.eval_interval``), and with
    ``train.checkpoint_resets_envs`` reset the envs next."""
    train = engine.config.train
    if train.checkpoint_resets_envs:  # a run resumed here starts from a seeded reset: so does this one
        # Before the save: the episodes in flight it stores (truncated) are in the checkpoint's data too.
        engine.buffer.truncate_episodes(engine.env_ids)
        engine.collector.forget()
    engine.save(engine.run_dir / "checkpoints" / f"iter_{engine.iteration:06d}", include_buffer=train.checkpoint_buffer)
    prune_checkpoints(engine.run_dir, train.keep_checkpoints, FORMAT_VERSION, keep_best=bool(train.eval_interval))


def restore_checkpoint(engine: Any, path: Path) -> None:
    """Restore what `write_checkpoint` wrote into ``engine`` (RNG states too).

    Raises:
        CheckpointError: a missing or invalid file.
        ValueError: the checkpoint was written by another engine.
    """
    state, _ = load_engine_files(path)
    if state["engine"] != engine.name:
        raise ValueError(f"checkpoint was written by engine {state['engine']!r}, this is {engine.name!r}")
    version = engine.policy_group.load_checkpoint(str(path / "policy.pt"))
    if engine.env_weight_sync is not None:  # the env workers' copies (the eval workers got it from the load)
        engine.env_weight_sync.push(version)
    data = load_buffer_data(path)
    if data is not None:
        engine.buffer.clear()
        engine.buffer.extend(data)
    if (path / BUFFER_RNG).is_file() and hasattr(engine.buffer, "set_rng_states"):
        engine.buffer.set_rng_states(torch.load(path / BUFFER_RNG, weights_only=True))
    engine.iteration = state["iteration"]
    engine.env_steps = state["env_steps"]
    engine.episodes = state["episodes"]
    restore = getattr(engine.env_group, "restore_stats", None)
    if isinstance(state.get("env_stats"), dict) and restore is not None:
        restore(state["env_stats"])
    if (path / WORKERS_RNG).is_file():
        set_workers_rng_state(engine, torch.load(path / WORKERS_RNG, weights_only=True))
    engine.metrics.history.extend(row for row in state.get("metrics", []) if isinstance(row, dict))


def newest_complete(run_dir: Union[str, Path]) -> Path:
    """The newest complete checkpoint folder of ``run_dir`` (incomplete ones logged and skipped).

    Raises:
        FileNotFoundError: there is none.
    """
    info = newest_checkpoint(run_dir, FORMAT_VERSION)
    if info is None:
        raise FileNotFoundError(
            f"resume: {str(run_dir)!r} holds no complete checkpoint (iter_* folders under checkpoints/); "
            "give the run folder of a run that saved one (train.checkpoint_interval)"
        )
    return info.path
