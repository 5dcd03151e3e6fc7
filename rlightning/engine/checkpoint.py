"""Engine checkpoints: data only (JSON, YAML, tensors loaded with ``weights_only=True``).

Layout of a checkpoint folder::

    engine.json    counters, metrics history, env statistics, format version, the other files' sizes
    config.yaml    the run's MainConfig
    policy.pt      the policy group's checkpoint (weights, optimizers, counters)
    rng.pt         torch and numpy RNG states as tensors
    buffer.pt      stored data (optional)

Nothing here unpickles code: a crafted file can at worst fail validation.
Folders are written atomically and listed by `rlightning.engine.checkpoint_store`;
``engine.json`` is written last and names every other file with its size.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import torch
import yaml

from rlightning.utils.config import MainConfig, config_from_dict, to_yaml

FORMAT_VERSION = 2
#: Formats `load_engine_files` reads when given a folder explicitly (1: before atomic writes, no file list).
READABLE_VERSIONS = (1, 2)
_ENGINE_KEYS = {"format_version": int, "iteration": int, "env_steps": int, "episodes": int, "engine": str}


class CheckpointError(ValueError):
    """A checkpoint folder is missing a file or holds invalid data."""


def save_engine_files(path: Path, state: Dict[str, Any], config: MainConfig) -> None:
    """Write ``config.yaml``, ``rng.pt`` and, last, ``engine.json`` (listing every file of ``path``) into ``path``."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.yaml").write_text(to_yaml(config))
    np_state = np.random.get_state()
    torch.save(
        {
            "torch": torch.get_rng_state(),
            "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "numpy_pos": torch.tensor(int(np_state[2])),
            "python": torch.tensor([int(x) for x in random.getstate()[1]], dtype=torch.int64),
        },
        path / "rng.pt",
    )
    data = dict(state)
    data["format_version"] = FORMAT_VERSION
    data["files"] = {
        f.name: f.stat().st_size for f in sorted(path.iterdir()) if f.is_file() and f.name != "engine.json"
    }
    (path / "engine.json").write_text(json.dumps(data))


def load_engine_files(path: Path) -> tuple[Dict[str, Any], MainConfig]:
    """Read and validate ``engine.json`` and ``config.yaml``; restore RNG states from ``rng.pt``.

    Raises:
        CheckpointError: a missing file, a field of the wrong type, or an invalid config.
    """
    path = Path(path)
    for name in ("engine.json", "config.yaml", "policy.pt"):
        if not (path / name).is_file():
            raise CheckpointError(
                f"checkpoint {str(path)!r} has no {name}; expected engine.json, config.yaml, policy.pt"
            )
    try:
        state = json.loads((path / "engine.json").read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"checkpoint engine.json is not valid JSON: {err}") from None
    if not isinstance(state, dict):
        raise CheckpointError("checkpoint engine.json must hold an object")
    for key, typ in _ENGINE_KEYS.items():
        if not isinstance(state.get(key), typ) or isinstance(state.get(key), bool):
            raise CheckpointError(
                f"checkpoint engine.json field {key!r} must be {typ.__name__}, got {state.get(key)!r}"
            )
    if state["format_version"] not in READABLE_VERSIONS:
        raise CheckpointError(
            f"checkpoint format {state['format_version']} is not supported (expected one of {READABLE_VERSIONS})"
        )
    try:
        raw = yaml.safe_load((path / "config.yaml").read_text())
    except yaml.YAMLError as err:
        raise CheckpointError(f"checkpoint config.yaml is not valid YAML: {err}") from None
    try:
        config = config_from_dict(raw, source="in checkpoint config.yaml", legacy=True)
    except ValueError as err:
        raise CheckpointError(str(err)) from None
    rng_file = path / "rng.pt"
    if rng_file.is_file():
        rng = torch.load(rng_file, weights_only=True)
        torch.set_rng_state(rng["torch"])
        np.random.set_state(("MT19937", rng["numpy_keys"].numpy().astype(np.uint32), int(rng["numpy_pos"]), 0, 0.0))
        py = tuple(int(x) for x in rng["python"].tolist())
        random.setstate((3, py, None))
    return state, config


def save_buffer_data(path: Path, data: Optional[Any]) -> None:
    """Save the buffer's stored data (a TensorDict or dict of tensors) as plain tensors."""
    if data is None:
        return
    flat = {k: v for k, v in (data.to_dict() if hasattr(data, "to_dict") else dict(data)).items()}
    torch.save(flat, path / "buffer.pt")


def load_buffer_data(path: Path) -> Optional[Dict[str, Any]]:
    """Load ``buffer.pt`` (tensors only) or None when the checkpoint has none."""
    file = Path(path) / "buffer.pt"
    if not file.is_file():
        return None
    return torch.load(file, weights_only=True)
