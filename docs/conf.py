"""Sphinx configuration of the rlightning documentation site (built by ``scripts/docs``)."""

from __future__ import annotations

import shutil
import sys
import warnings
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(DOCS / "_ext"))
# sphinx-autodoc-typehints calls an API that Sphinx 10 removes; the notice is not about this site.
warnings.filterwarnings("ignore", message=".*set_application.*is deprecated")

project = "rlightning"
author = "the rlightning authors"
copyright = "the rlightning authors"  # noqa: A001 (Sphinx's name)
release = version = "0.1.0"

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "sphinx.ext.intersphinx",
    "sphinx_autodoc_typehints",
    "myst_nb",
    "rlightning_docs",
]

# The committed notebooks are copied in at each build (they live in notebooks/, where nbval runs them).
NOTEBOOKS_OUT = DOCS / "notebooks"


def _copy_notebooks() -> None:
    if NOTEBOOKS_OUT.exists():
        shutil.rmtree(NOTEBOOKS_OUT)
    (NOTEBOOKS_OUT / "course").mkdir(parents=True)
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        shutil.copy2(nb, NOTEBOOKS_OUT / nb.name)
    for nb in sorted((ROOT / "notebooks" / "course").glob("[0-9][0-9]_*.ipynb")):
        shutil.copy2(nb, NOTEBOOKS_OUT / "course" / nb.name)


_copy_notebooks()

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store", "**/.ipynb_checkpoints"]
root_doc = "index"

# Notebooks render with the outputs stored in them; widgets from the widget state saved with them.
nb_execution_mode = "off"
nb_merge_streams = True
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

# API reference: the seed documents' shape (signatures with types, "Bases: object", [source] links).
autodoc_default_options = {
    "show-inheritance": True,
    "member-order": "alphabetical",
}
autodoc_typehints = "signature"
autodoc_class_signature = "mixed"
always_document_param_types = False
typehints_use_signature = True
typehints_use_signature_return = True
typehints_fully_qualified = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
# Optional dependencies of a few modules: the pages build without them.
autodoc_mock_imports = ["ale_py", "minatar", "pettingzoo", "mpe2", "cv2", "mujoco", "Box2D", "onnxruntime", "onnx"]

intersphinx_mapping = {}  # no network during the build: external names stay plain text

nitpicky = False
suppress_warnings = [
    # docstrings written for the README and the notebooks use `name` (Markdown's code) that reST reads as a role.
    "ref.python",
    # types from packages without an inventory here (torch, tensordict, gymnasium, ray) stay plain text.
    "sphinx_autodoc_typehints.forward_reference",
    "sphinx_autodoc_typehints.guarded_import",
    # Re-exported names are documented once, under their public package; Sphinx notes the other path.
    "autodoc.import_object",
    # widget state saved in notebooks uses a mime type the HTML builder shows by its JavaScript.
    "mystnb.unknown_mime_type",
]

html_theme = "pydata_sphinx_theme"
html_title = "rlightning"
# The widget manager's scripts, fetched from the npm registry by scripts/docs (docs/_ext/offline_assets.py), are
# served with the site, so widgets render from their saved state with no network. Math is MathML, made at build
# time (rlightning_docs). A build without the fetched scripts (sphinx-build run by hand) loads them from the CDN.
import offline_assets  # noqa: E402 (docs/_ext is on sys.path above)

html_static_path = ["_static"]  # the site's own CSS (the math's size)
html_css_files = ["rlightning.css"]
if offline_assets.complete():
    html_static_path.append(str(offline_assets.ASSETS))
    nb_ipywidgets_js = {script: {} for script in offline_assets.SCRIPTS}
html_math_renderer = "mathml"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc", "sourcelink"],
}
html_show_sourcelink = False

# The link check (scripts/docs) checks the site's own links only: no network.
linkcheck_ignore = [r"https?://.*", r"mailto:.*"]
linkcheck_anchors = False
