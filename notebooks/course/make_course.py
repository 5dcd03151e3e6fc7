"""Write the course notebooks from their sources, and optionally execute them.

The sources in ``notebooks/course/src/`` use the percent format of ``notebooks/make_notebooks.py`` (whose
parser and output carrying this reuses), plus one cell kind: ``# %% [solution]`` starts a code cell whose
source is collapsed in Jupyter (``"jupyter": {"source_hidden": true}``): an exercise's solution, run by
nbval like any other cell.

    python notebooks/course/make_course.py                 # write the notebooks (outputs kept if the code is unchanged)
    python notebooks/course/make_course.py --execute       # write, then execute in place (outputs committed)
    python notebooks/course/make_course.py 02 --execute    # only the notebooks whose name starts with 02
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from typing import List

import nbformat

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"


def _make_notebooks():
    """``notebooks/make_notebooks.py`` as a module (it is a script, not part of a package)."""
    spec = importlib.util.spec_from_file_location("make_notebooks", HERE.parent / "make_notebooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def solution_flags(text: str) -> List[bool]:
    """For each non-empty cell of a percent source, in order: is it a ``# %% [solution]`` cell."""
    flags: List[bool] = []
    body: List[str] = []
    current = None
    for line in text.splitlines() + ["# %% end"]:
        if line.startswith("# %%"):
            if current is not None and "\n".join(body).strip():
                flags.append(current)
            current, body = "[solution]" in line, []
        else:
            body.append(line.lstrip("#").strip() if line.startswith("#") else line)
    return flags


def build(src: Path) -> nbformat.NotebookNode:
    """The notebook of one source: make_notebooks' cells, solution cells collapsed."""
    mk = _make_notebooks()
    nb = mk.build(src)
    flags = solution_flags(src.read_text())
    if len(flags) != len(nb.cells):
        raise ValueError(f"{src.name}: {len(flags)} cell markers against {len(nb.cells)} cells")
    for cell, is_solution in zip(nb.cells, flags):
        cell["id"] = f"c{cell['id']}"  # distinct from the tutorials' ids
        if is_solution:
            cell.metadata["jupyter"] = {"source_hidden": True}
            cell.metadata["tags"] = ["solution", "hide-input"]  # myst-nb (the site) collapses it too
    return nb


def main(argv: List[str]) -> int:
    """Write (and with ``--execute`` run) the course notebooks."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="prefixes of the notebooks to write (default: all)")
    parser.add_argument("--execute", action="store_true", help="execute the written notebooks in place")
    args = parser.parse_args(argv)
    sources = sorted(SRC.glob("[0-9][0-9]_*.py"))
    if args.only:
        sources = [s for s in sources if any(s.stem.startswith(p) for p in args.only)]
    if not sources:
        parser.error(f"no course source matches {args.only} in {SRC}")
    mk = _make_notebooks()
    for src in sources:
        target = HERE / f"{src.stem}.ipynb"
        nb = build(src)
        kept = target.exists() and mk.carry_outputs(nb, nbformat.read(target, as_version=4))
        if kept:  # carry_outputs copies the old cells' metadata: the solution flags come from the source
            for cell, fresh in zip(nb.cells, build(src).cells):
                cell.metadata = fresh.metadata
        nbformat.write(nb, target)
        print(f"wrote {target.name} ({'outputs kept' if kept else 'no outputs: run with --execute'})")
        if args.execute:
            print(f"executed {target.name} in {mk.execute(target, timeout=600, cwd=HERE):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
