"""Write the documentation notebooks from their sources, and optionally execute them.

Each notebook is written as a plain Python file in ``notebooks/src/`` in the
"percent" format: ``# %%`` starts a code cell, ``# %% [markdown]`` a markdown
cell whose lines are comments (``# `` is stripped). Edit the source, then:

    python notebooks/make_notebooks.py                 # write notebooks/*.ipynb (outputs kept if the code is unchanged)
    python notebooks/make_notebooks.py --execute       # write, then execute in place (outputs committed)
    python notebooks/make_notebooks.py 01 --execute    # only the notebooks whose name starts with 01

Executing is the same as ``jupyter nbconvert --to notebook --execute --inplace notebooks/NAME.ipynb``
run from the ``notebooks/`` folder; widget state is stored with the outputs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List, Tuple

import nbformat

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"

KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {"name": "python", "pygments_lexer": "ipython3", "file_extension": ".py", "mimetype": "text/x-python"}


def parse_percent(text: str) -> List[Tuple[str, str]]:
    """Split a percent-format source into (kind, source) cells; kind is "code" or "markdown"."""
    cells: List[Tuple[str, List[str]]] = []
    for line in text.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
            cells.append((kind, []))
            continue
        if not cells:
            if line.strip() and not line.startswith("#"):
                raise ValueError(f"text before the first '# %%' cell marker: {line!r}")
            continue
        kind, lines = cells[-1]
        if kind == "markdown":
            if line.strip() and not line.startswith("#"):
                raise ValueError(f"markdown cell line does not start with '#': {line!r}")
            line = line[2:] if line.startswith("# ") else line[1:]
        lines.append(line)
    out = []
    for kind, lines in cells:
        body = "\n".join(lines).strip("\n")
        if body:
            out.append((kind, body))
    return out


def build(src: Path) -> nbformat.NotebookNode:
    """A notebook (no outputs) from one percent-format source file."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = dict(KERNELSPEC)
    nb.metadata["language_info"] = dict(LANGUAGE_INFO)
    for i, (kind, body) in enumerate(parse_percent(src.read_text())):
        cell = nbformat.v4.new_markdown_cell(body) if kind == "markdown" else nbformat.v4.new_code_cell(body)
        cell["id"] = f"{src.stem[:2]}-{i:03d}"  # stable ids: regenerating gives small diffs
        nb.cells.append(cell)
    nbformat.validate(nb)
    return nb


def carry_outputs(new: nbformat.NotebookNode, old: nbformat.NotebookNode) -> bool:
    """Copy outputs (and widget state) of ``old`` into ``new`` when their code cells are identical.

    A change to markdown alone then keeps the executed outputs; any change to code does not.
    """
    new_code = [c for c in new.cells if c.cell_type == "code"]
    old_code = [c for c in old.cells if c.cell_type == "code"]
    if [c.source for c in new_code] != [c.source for c in old_code]:
        return False
    for n, o in zip(new_code, old_code):
        n.outputs = o.outputs
        n.execution_count = o.execution_count
        n.metadata = o.metadata
    if "widgets" in old.metadata:
        new.metadata["widgets"] = old.metadata["widgets"]
    return True


def execute(path: Path, timeout: int = 900, cwd: Path = HERE) -> float:
    """Execute a notebook in place from ``cwd`` (the notebooks folder); returns the seconds it took."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    t0 = time.perf_counter()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}})
    client.execute()
    seconds = time.perf_counter() - t0
    nbformat.write(nb, path)
    return seconds


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("only", nargs="*", help="prefixes of the notebooks to write (default: all)")
    parser.add_argument("--execute", action="store_true", help="execute the written notebooks in place")
    args = parser.parse_args(argv)
    sources = sorted(SRC.glob("[0-9][0-9]_*.py"))
    if args.only:
        sources = [s for s in sources if any(s.stem.startswith(p) for p in args.only)]
    if not sources:
        parser.error(f"no notebook source matches {args.only} in {SRC}")
    for src in sources:
        target = HERE / f"{src.stem}.ipynb"
        nb = build(src)
        kept = target.exists() and carry_outputs(nb, nbformat.read(target, as_version=4))
        nbformat.write(nb, target)
        print(f"wrote {target.name} ({'outputs kept' if kept else 'no outputs: run with --execute'})")
        if args.execute:
            print(f"executed {target.name} in {execute(target):.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
