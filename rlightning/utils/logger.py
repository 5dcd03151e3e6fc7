"""Library logging: every module logs through ``get_logger(__name__)``."""

from __future__ import annotations

import logging
import os

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_configured = False


def _configure_root() -> None:
    global _configured
    if _configured:
        return
    root = logging.getLogger("rlightning")
    if not root.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
        root.addHandler(handler)
    root.setLevel(os.environ.get("RLIGHTNING_LOG_LEVEL", "WARNING").upper())
    root.propagate = False
    _configured = True


def get_logger(name: str) -> logging.Logger:
    """Return a logger under the ``rlightning`` hierarchy."""
    _configure_root()
    if not name.startswith("rlightning"):
        name = f"rlightning.{name}"
    return logging.getLogger(name)


def set_level(level: str | int) -> None:
    """Set the level of every rlightning logger (``"INFO"``, ``logging.DEBUG``, ...)."""
    _configure_root()
    logging.getLogger("rlightning").setLevel(level.upper() if isinstance(level, str) else level)
