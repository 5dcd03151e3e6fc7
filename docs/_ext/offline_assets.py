"""The widget manager's scripts, served with the site instead of from a CDN (``scripts/docs`` runs this first).

myst-nb shows a notebook's saved widget state with ``@jupyter-widgets/html-manager``'s ``embed-amd.js`` (which
bundles the standard widgets: ``@jupyter-widgets/base``, ``controls`` and ``output``, all the notebooks use),
loaded through RequireJS. By default both come from a CDN when a page opens. Here they come from the npm
registry at build time, at the versions pinned in `PACKAGES`: ``npm pack`` fetches each package's tarball
alone (no dependencies are installed; npm checks the registry's integrity hash), and the files the pages load
are unpacked into ``docs/_build/assets``, which ``docs/conf.py`` serves as static files. The folder is kept
between builds; a pinned version that changes is fetched again. It needs Node.js's ``npm`` on the PATH.

    python docs/_ext/offline_assets.py [FOLDER]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Dict, List, Tuple

DOCS = Path(__file__).resolve().parents[1]
ASSETS = DOCS / "_build" / "assets"
#: npm package -> (version, [(file in the tarball, where it goes under the assets folder)]). A file ending in "/"
#: is a folder: every file in it is copied except source maps and the bundles the pages do not load.
PACKAGES: Dict[str, Tuple[str, List[Tuple[str, str]]]] = {
    "requirejs": ("2.3.8", [("package/require.js", "require.js")]),
    "@jupyter-widgets/html-manager": ("1.0.15", [("package/dist/", "jupyter-widgets/")]),
}
SKIP_IN_FOLDERS = (".map", "/embed.js", "/libembed-amd.js", "/embed.js.LICENSE.txt")
STAMP = "versions.json"
#: What `docs/conf.py` gives myst-nb (``nb_ipywidgets_js``): the pages load these, in this order.
SCRIPTS = ["require.js", "jupyter-widgets/embed-amd.js"]


def complete(folder: Path = ASSETS) -> bool:
    """Whether ``folder`` holds the pinned versions' files."""
    try:
        have = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return False
    want = {name: version for name, (version, _) in PACKAGES.items()}
    return have == want and all((folder / s).is_file() for s in SCRIPTS)


def fetch(folder: Path = ASSETS) -> None:
    """Fetch and unpack the pinned packages into ``folder`` (replacing what was there)."""
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit(
            "docs: npm (Node.js) is needed to fetch the widget manager's scripts for the site "
            "(on Debian: apt-get install nodejs npm)"
        )
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name, (version, files) in PACKAGES.items():
            spec = f"{name}@{version}"
            out = subprocess.run(
                [npm, "pack", spec, "--json", "--pack-destination", tmp], capture_output=True, text=True, timeout=300
            )
            if out.returncode != 0:
                raise SystemExit(f"docs: npm pack {spec} failed:\n{out.stderr.strip()}")
            tarball = Path(tmp) / json.loads(out.stdout)[0]["filename"]
            with tarfile.open(tarball) as tar:
                members = {m.name: m for m in tar.getmembers() if m.isfile()}
                for src, dest in files:
                    picked = (
                        [
                            (n, dest + n[len(src) :])
                            for n in members
                            if n.startswith(src) and not n.endswith(SKIP_IN_FOLDERS)
                        ]
                        if src.endswith("/")
                        else [(src, dest)]
                    )
                    if not picked or any(n not in members for n, _ in picked):
                        raise SystemExit(f"docs: {spec} has no {src}; its files: {sorted(members)[:20]} ...")
                    for n, d in picked:
                        target = folder / d
                        target.parent.mkdir(parents=True, exist_ok=True)
                        with tar.extractfile(members[n]) as f:  # type: ignore[union-attr]
                            target.write_bytes(f.read())
    (folder / STAMP).write_text(json.dumps({name: version for name, (version, _) in PACKAGES.items()}))


def main(argv: List[str]) -> int:
    folder = Path(argv[0]) if argv else ASSETS
    if complete(folder):
        return 0
    fetch(folder)
    print(f"[rlightning] fetched {', '.join(f'{n}@{v}' for n, (v, _) in PACKAGES.items())} into {folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
