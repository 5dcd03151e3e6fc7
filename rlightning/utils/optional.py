"""Optional metric loggers and the rlightning extra each needs (checked before a run is built)."""

from __future__ import annotations

import importlib
from typing import Any, List

#: The optional metric loggers: ``log.<field>`` -> (the module it needs, the rlightning extra that installs it).
OPTIONAL_LOGGERS = {
    "tensorboard": ("tensorboard", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
}


def missing_logger_message(field: str) -> str:
    """What to say when ``log.<field>`` asks for a logger whose package is not installed."""
    module, extra = OPTIONAL_LOGGERS[field]
    return (
        f"log.{field}=true needs the {module!r} package, which is not installed: "
        f'pip install "rlightning[{extra}]" (or set log.{field}=false)'
    )


def missing_loggers(log_cfg: Any) -> List[str]:
    """The ``log.<field>`` loggers asked for in ``log_cfg`` whose package cannot be imported."""
    missing = []
    for field, (module, _) in OPTIONAL_LOGGERS.items():
        if not getattr(log_cfg, field, False):
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(field)
    return missing
