"""Checkpoint folders on disk: written atomically, listed, checked, pruned.

A checkpoint is written into a hidden temporary folder beside its target
(``.iter_000010.tmp-XXXX``); every file and the folder are fsynced, then the
folder is renamed into place (and the parent fsynced). A process killed at
any moment leaves each checkpoint complete or absent: at worst a temporary
folder, which is never read and is removed by the next prune.

A folder counts as complete when its ``engine.json`` parses, has the current
format version, and names every other file with its size, and those files
are there with those sizes. Anything else (an older format, a damaged folder)
is reported as incomplete and skipped when looking for the newest.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, List, Optional, Union

from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = [
    "CheckpointInfo",
    "atomic_folder",
    "checkpoint_status",
    "list_checkpoints",
    "newest_checkpoint",
    "prune_checkpoints",
]

_NAME = re.compile(r"^iter_(\d+)$")
_TMP_MARK = ".tmp-"


@dataclass(frozen=True)
class CheckpointInfo:
    """One checkpoint folder of a run.

    Attributes:
        path: The folder.
        iteration: The iteration in its name (``iter_000010``: 10).
        complete: True when it can be loaded (see the module docstring).
        reason: Why it is incomplete ("" when complete).
        eval_return: The evaluation return recorded with it (None when none was).
    """

    path: Path
    iteration: int
    complete: bool
    reason: str = ""
    eval_return: Optional[float] = None


def _fsync(path: Path, directory: bool = False) -> None:
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # some platforms cannot open a folder: nothing to sync there
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_folder(target: Union[str, Path]) -> Iterator[Path]:
    """Yield a temporary folder beside ``target``; on a clean exit it is fsynced and renamed to ``target``.

    An existing ``target`` is replaced (moved aside, then removed once the new folder is in place). On an
    exception the temporary folder is removed and ``target`` is left as it was.
    """
    target = Path(target)
    parent = target.parent
    parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}{_TMP_MARK}", dir=parent))
    try:
        yield tmp
        for file in tmp.rglob("*"):
            if file.is_file():
                _fsync(file)
        _fsync(tmp, directory=True)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}{_TMP_MARK}old-", dir=parent))
            os.replace(target, old / target.name)
        os.replace(tmp, target)
        _fsync(parent, directory=True)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def checkpoint_status(path: Union[str, Path], format_version: int) -> CheckpointInfo:
    """Check one checkpoint folder (see the module docstring) without loading its tensors."""
    path = Path(path)
    match = _NAME.match(path.name)
    iteration = int(match.group(1)) if match else -1

    def incomplete(reason: str) -> CheckpointInfo:
        return CheckpointInfo(path, iteration, False, reason)

    engine_file = path / "engine.json"
    if not engine_file.is_file():
        return incomplete("no engine.json")
    try:
        state = json.loads(engine_file.read_text())
    except (OSError, ValueError) as err:
        return incomplete(f"engine.json unreadable ({err})")
    if not isinstance(state, dict):
        return incomplete("engine.json holds no object")
    version = state.get("format_version")
    if version != format_version:
        return incomplete(f"format version {version!r}, not {format_version} (an older rlightning wrote it)")
    files = state.get("files")
    if not isinstance(files, dict) or "policy.pt" not in files:
        return incomplete("engine.json lists no files")
    for name, size in files.items():
        file = path / str(name)
        if not file.is_file():
            return incomplete(f"no {name}")
        if file.stat().st_size != size:
            return incomplete(f"{name} has {file.stat().st_size} bytes, engine.json says {size}")
    value = state.get("eval_return")
    eval_return = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    return CheckpointInfo(path, int(state.get("iteration", iteration)), True, "", eval_return)


def _checkpoints_dir(run_dir: Path) -> Path:
    """``run_dir/checkpoints`` when it exists, else ``run_dir`` itself (a folder of ``iter_*`` folders)."""
    inner = run_dir / "checkpoints"
    return inner if inner.is_dir() else run_dir


def list_checkpoints(run_dir: Union[str, Path], format_version: int) -> List[CheckpointInfo]:
    """Every ``iter_*`` folder of a run (``run_dir`` or ``run_dir/checkpoints``), oldest first, checked."""
    folder = _checkpoints_dir(Path(run_dir))
    if not folder.is_dir():
        return []
    found = [checkpoint_status(p, format_version) for p in folder.iterdir() if p.is_dir() and _NAME.match(p.name)]
    return sorted(found, key=lambda c: (c.iteration, c.path.name))


def newest_checkpoint(run_dir: Union[str, Path], format_version: int) -> Optional[CheckpointInfo]:
    """The newest complete checkpoint of a run (None when there is none); incomplete ones are logged, skipped."""
    for info in reversed(list_checkpoints(run_dir, format_version)):
        if info.complete:
            return info
        logger.warning("checkpoint %s is incomplete (%s); skipped", info.path, info.reason)
    return None


def prune_checkpoints(
    run_dir: Union[str, Path], keep: Optional[int], format_version: int, keep_best: bool = False
) -> List[Path]:
    """Remove all but the newest ``keep`` complete checkpoints (plus the best by eval return with
    ``keep_best``), and temporary folders left by killed writers; returns the folders removed.

    Incomplete folders are reported, never removed (they may hold what someone wants to look at).
    """
    folder = _checkpoints_dir(Path(run_dir))
    removed: List[Path] = []
    if not folder.is_dir():
        return removed
    for stale in folder.iterdir():
        if stale.is_dir() and stale.name.startswith(".") and _TMP_MARK in stale.name:
            shutil.rmtree(stale, ignore_errors=True)
            removed.append(stale)
    if keep is None:
        return removed
    infos = list_checkpoints(folder, format_version)
    complete = [c for c in infos if c.complete]
    for c in infos:
        if not c.complete:
            logger.warning("checkpoint %s is incomplete (%s); left in place", c.path, c.reason)
    kept = {c.path for c in complete[-keep:]} if keep > 0 else set()
    if keep_best:
        scored = [c for c in complete if c.eval_return is not None]
        if scored:
            kept.add(max(scored, key=lambda c: (c.eval_return, c.iteration)).path)
    for c in complete:
        if c.path not in kept:  # renamed out of sight first: a kill mid-removal leaves no half folder
            doomed = Path(tempfile.mkdtemp(prefix=f".{c.path.name}{_TMP_MARK}gone-", dir=folder))
            os.replace(c.path, doomed / c.path.name)
            shutil.rmtree(doomed, ignore_errors=True)
            removed.append(c.path)
    return removed
