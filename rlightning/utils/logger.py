"""Library logging: every module logs through ``get_logger(__name__)``.

Lines meant for the user's eyes as they are (a launcher's progress, a job's log lines, worker output)
go through ``get_cell_logger(__name__)``: its records are written bare, one line each, to the
process's ``sys.stdout`` (``sys.stderr`` for ``extra={"cell_stream": "stderr"}``) as it is when the
record is emitted, which in Jupyter is the running cell's output. They show whatever
``RLIGHTNING_LOG_LEVEL`` says; ``logging.getLogger("rlightning.cell").setLevel("WARNING")`` hides them.
"""

from __future__ import annotations

import logging
import os
import sys

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
CELL_LOGGER = "rlightning.cell"
"""The parent of every `get_cell_logger` logger."""
_configured = False
_cell_configured = False


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


class CellOutputHandler(logging.Handler):
    """Writes each record's message as is, one line, to the current ``sys.stdout`` and flushes it.

    The stream is looked up when the record is emitted (in Jupyter: the output of the cell that is
    running, also from a background thread). A record with ``cell_stream="stderr"`` goes to ``sys.stderr``.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if getattr(record, "cell_stream", "stdout") == "stderr" else sys.stdout
            stream.write(self.format(record) + "\n")
            stream.flush()
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 - logging's own convention: report, never raise from a handler
            self.handleError(record)


def _configure_cell() -> None:
    global _cell_configured
    if _cell_configured:
        return
    cell = logging.getLogger(CELL_LOGGER)
    if not any(isinstance(h, CellOutputHandler) for h in cell.handlers):
        cell.addHandler(CellOutputHandler())
    cell.setLevel(logging.INFO)
    cell.propagate = False  # not again, prefixed, through the "rlightning" handler
    _cell_configured = True


def get_cell_logger(name: str) -> logging.Logger:
    """A logger whose INFO records are shown to the user bare, in the running cell (see the module docstring)."""
    _configure_cell()
    if name == CELL_LOGGER or name.startswith(CELL_LOGGER + "."):
        return logging.getLogger(name)
    return logging.getLogger(f"{CELL_LOGGER}.{name.removeprefix('rlightning.')}")
