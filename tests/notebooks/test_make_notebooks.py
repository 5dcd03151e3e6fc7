"""Tests of notebooks/make_notebooks.py and of the committed notebooks against their sources."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
EXPECTED = [
    "01_quickstart",
    "02_buffer_and_episode_table",
    "03_remote_cluster",
    "04_custom_env_and_policy",
    "05_async_and_timing",
    "06_multi_agent",
    "07_experiments",
    "08_learning_from_a_dataset",
]


def _generator():
    spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_percent_splits_code_and_markdown_cells():
    gen = _generator()
    text = "# %% [markdown]\n# # Title\n#\n# Some *text*.\n\n# %%\nx = 1\n\nprint(x)\n\n# %%\n\n"
    assert gen.parse_percent(text) == [("markdown", "# Title\n\nSome *text*."), ("code", "x = 1\n\nprint(x)")]


def test_parse_percent_rejects_code_outside_cells_and_bare_markdown_lines():
    gen = _generator()
    with pytest.raises(ValueError, match="before the first '# %%' cell marker: 'x = 1'"):
        gen.parse_percent("x = 1\n# %%\ny = 2\n")
    with pytest.raises(ValueError, match="markdown cell line does not start with '#': 'oops'"):
        gen.parse_percent("# %% [markdown]\n# fine\noops\n")


def test_every_notebook_has_a_source_and_is_committed_with_outputs():
    sources = sorted(p.stem for p in (NOTEBOOKS / "src").glob("[0-9][0-9]_*.py"))
    assert sources == EXPECTED
    for name in EXPECTED:
        nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert code and all(c.get("execution_count") for c in code), f"{name}.ipynb is not fully executed"
        assert any(c["outputs"] for c in code), f"{name}.ipynb has no outputs"
        assert nb["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_notebook_matches_its_source(name):
    gen = _generator()
    built = gen.build(NOTEBOOKS / "src" / f"{name}.py")
    committed = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    want = [(c["cell_type"], c["source"]) for c in built.cells]
    have = [(c["cell_type"], "".join(c["source"])) for c in committed["cells"]]
    assert have == want, f"{name}.ipynb differs from notebooks/src/{name}.py: run notebooks/make_notebooks.py --execute"


@pytest.mark.parametrize("name", EXPECTED)
def test_each_notebook_starts_a_lab_shuts_it_down_and_checks_outputs(name):
    cells = _generator().parse_percent((NOTEBOOKS / "src" / f"{name}.py").read_text())
    code = [body for kind, body in cells if kind == "code"]
    assert any("Lab.local(" in c or "Lab.connect(" in c for c in code[:3]), "a Lab is started at the top"
    assert "lab.shutdown()" in code[-1], "the last cell shuts the Lab down"
    assert sum("# NBVAL_CHECK_OUTPUT" in c for c in code) >= 3, "deterministic outputs are checked"
    assert not any("ray stop" in c or '"stop"' in c for c in code), "never stop every Ray on the machine"


@pytest.mark.parametrize("name", EXPECTED)
def test_committed_outputs_hold_no_tokens_or_secrets(name):
    import re

    outputs = []
    for cell in json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())["cells"]:
        for out in cell.get("outputs", []):
            outputs.append(json.dumps(out))
    text = "\n".join(outputs)
    token_file = Path.home() / ".ray" / "auth_token"
    if token_file.is_file() and len(token_file.read_text().strip()) >= 16:
        assert token_file.read_text().strip() not in text
    assert not re.search(r"(?i)(auth_token|RAY_AUTH_TOKEN|token)\W{1,3}[0-9a-f]{24,}", text)
