"""Tests of rlightning/utils/logger.py: library logs, and the cell logger that shows lines to the user bare."""

import ast
import logging
from pathlib import Path

import rlightning
from rlightning.utils.logger import CELL_LOGGER, get_cell_logger, get_logger, set_level


def test_cell_lines_reach_the_current_stdout_or_stderr_bare(capsys):
    cell = get_cell_logger("rlightning.notebook.probe")
    assert cell.name == f"{CELL_LOGGER}.notebook.probe" and get_cell_logger(cell.name) is cell
    cell.info("[rlightning] head %s is up; 100%% ready", "10.0.0.5")
    cell.info("%s", "two\nlines with a % sign")
    cell.info("%s", "(pid=8) oops", extra={"cell_stream": "stderr"})
    shown = capsys.readouterr()
    assert shown.out == "[rlightning] head 10.0.0.5 is up; 100% ready\ntwo\nlines with a % sign\n"
    assert shown.err == "(pid=8) oops\n"  # only there: not again, prefixed, through the library logger


def test_cell_lines_ignore_the_library_log_level_and_can_be_hidden(capsys):
    cell = get_cell_logger("probe")
    library = get_logger("probe")
    previous = logging.getLogger("rlightning").level
    try:
        set_level("ERROR")
        library.warning("a library warning below the level")
        cell.info("still shown")
        assert capsys.readouterr() == ("still shown\n", "")
        logging.getLogger(CELL_LOGGER).setLevel("WARNING")
        cell.info("hidden")
        assert capsys.readouterr() == ("", "")
    finally:
        logging.getLogger(CELL_LOGGER).setLevel(logging.INFO)
        logging.getLogger("rlightning").setLevel(previous)


def _print_calls(path: Path):
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print"
    ]


def test_only_the_cli_prints():
    """DESIGN: library code logs through rlightning.utils.logger; only the CLI prints."""
    root = Path(rlightning.__file__).parent
    files = [p for p in sorted(root.rglob("*.py")) if p != root / "cli.py"]
    assert root / "notebook" / "worker_logs.py" in files and _print_calls(root / "cli.py")  # the scan finds prints
    found = [f"{p.relative_to(root.parent)}:{line}" for p in files for line in _print_calls(p)]
    assert found == [], "print() in library code (log through rlightning.utils.logger):\n" + "\n".join(found)
