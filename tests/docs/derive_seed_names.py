"""Derive the list of public names the seed documents declare (run once; its output is seed_names.txt).

Usage: ``python tests/docs/derive_seed_names.py <seeds folder> > tests/docs/seed_names.txt``

The seed documents are rendered Sphinx pages (000, 003) and a module's source (004). From the pages it takes
each ``class rlightning.x.Y(...)`` and, inside a class, each member line (methods, static and class methods,
properties, fields with a ``¶`` anchor). From the source it takes the module's own functions and every name it
imports from ``rlightning``. Member names starting with ``_`` are left out.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

CLASS = re.compile(r"^class (rlightning(?:\.\w+)+)\(")
MEMBER = re.compile(r"^(?:static |classmethod |property )?([a-z]\w*)(?:\(|: |¶)")
DEF = re.compile(r"^def (\w+)\(")
FROM = re.compile(r"^from (rlightning(?:\.\w+)*) import \(?\s*([\w, ]*)")
NAME = re.compile(r"^(\w+),?$")


def from_page(text: str) -> set[str]:
    """Names from a rendered autodoc page: the classes and their public members."""
    names: set[str] = set()
    current = None
    for line in text.splitlines():
        if m := CLASS.match(line):
            current = m.group(1)
            names.add(current)
        elif current and (m := MEMBER.match(line)) and ("[source]" in line or "¶" in line or "property" in line):
            names.add(f"{current}.{m.group(1)}")
    return names


def from_source(text: str, module: str) -> set[str]:
    """Names from a module's source: its functions and what it imports from rlightning."""
    names: set[str] = set()
    pending = None
    for line in text.splitlines():
        if m := DEF.match(line):
            names.add(f"{module}.{m.group(1)}")
        elif m := FROM.match(line):
            pending = m.group(1)
            names.update(f"{pending}.{n.strip()}" for n in m.group(2).split(",") if n.strip())
            if "(" not in line:
                pending = None
        elif pending and (m := NAME.match(line.strip())):
            names.add(f"{pending}.{m.group(1)}")
        elif line.startswith(")"):
            pending = None
    return names


def main(folder: str) -> None:
    """Print the sorted names of every seed document in ``folder``."""
    names: set[str] = set()
    for path in sorted(Path(folder).glob("0*.txt")):
        text = path.read_text()
        if text.startswith('"""'):
            names |= from_source(text, "rlightning.utils.builders")
        else:
            names |= from_page(text)
    print("\n".join(sorted(names)))


if __name__ == "__main__":
    main(sys.argv[1])
