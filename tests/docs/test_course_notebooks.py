"""The course notebooks (notebooks/course): generated from their sources, committed executed, with
exercises whose solutions are collapsed. nbval runs them (scripts/test collects notebooks/ recursively)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

COURSE = Path(__file__).resolve().parents[2] / "notebooks" / "course"
EXPECTED = ["01_returns", "02_value_based", "03_policy_gradients_ppo_clip"]


def _maker():
    spec = importlib.util.spec_from_file_location("make_course", COURSE / "make_course.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_course_notebook_has_a_source():
    assert sorted(p.stem for p in (COURSE / "src").glob("[0-9][0-9]_*.py")) == EXPECTED


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_notebook_matches_its_source_and_is_executed(name):
    built = _maker().build(COURSE / "src" / f"{name}.py")
    committed = json.loads((COURSE / f"{name}.ipynb").read_text())
    want = [(c["cell_type"], c["source"], c.metadata.get("jupyter")) for c in built.cells]
    have = [(c["cell_type"], "".join(c["source"]), c["metadata"].get("jupyter")) for c in committed["cells"]]
    assert have == want, f"{name}.ipynb differs from its source: run notebooks/course/make_course.py --execute"
    code = [c for c in committed["cells"] if c["cell_type"] == "code"]
    assert all(c.get("execution_count") for c in code), f"{name}.ipynb is not fully executed"
    assert not any(o.get("output_type") == "error" for c in code for o in c["outputs"])


@pytest.mark.parametrize("name", EXPECTED)
def test_exercises_have_collapsed_solutions(name):
    cells = json.loads((COURSE / f"{name}.ipynb").read_text())["cells"]
    solutions = [c for c in cells if c["metadata"].get("jupyter", {}).get("source_hidden")]
    markdown = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    exercises = re.findall(r"\*\*\d+\.\*\*", markdown)  # "**1.** ..."
    assert len(solutions) >= 3 and len(solutions) == len(exercises)
    assert all(c["cell_type"] == "code" and c["outputs"] for c in solutions), "each solution runs and shows its answer"


def test_solution_flags_follow_the_cell_markers():
    text = "# %% [markdown]\n# # Title\n\n# %%\nx = 1\n\n# %% [solution]\nprint(x)\n\n# %%\n\n"
    assert _maker().solution_flags(text) == [False, False, True]
