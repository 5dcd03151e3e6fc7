"""The documentation site: ``scripts/docs`` builds it warning-free, every name the seed documents declare has
an entry in its API reference, and the built pages render in headless Chromium.

The site is built once per test session (module fixture); the browser test serves that build on a loopback
port. Screenshots go to the test's temporary folder, or to ``$RLIGHTNING_DOCS_SCREENSHOTS`` when set.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Dict, Iterator, List, Set

import pytest

from tests.support.browser import CHROMIUM_ARGS, find_chromium

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HTML = ROOT / "docs" / "_build" / "html"
SEED_NAMES = Path(__file__).with_name("seed_names.txt")


@pytest.fixture(scope="module")
def built_site() -> subprocess.CompletedProcess:
    """Run ``scripts/docs`` (a fresh build with warnings as errors, then the internal link check).

    With ``RLIGHTNING_DOCS_BUILT=1`` the site already in ``docs/_build/html`` is checked as it is (its links only):
    for rerunning the page tests after a build."""
    if os.environ.get("RLIGHTNING_DOCS_BUILT") == "1":
        cmd = [sys.executable, str(ROOT / "docs" / "_ext" / "check_links.py"), str(HTML)]
    else:
        cmd = ["bash", str(ROOT / "scripts" / "docs")]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def inventory_names(built_site: subprocess.CompletedProcess) -> Set[str]:
    """Every Python object the API reference describes, from the build's ``objects.inv``."""
    from sphinx.util.inventory import InventoryFile

    assert built_site.returncode == 0, built_site.stdout + built_site.stderr
    with open(HTML / "objects.inv", "rb") as f:
        inventory = InventoryFile.load(f, "", lambda base, uri: uri)
    data = getattr(inventory, "data", inventory)  # a dict before Sphinx 8.2, an _Inventory after
    return {name for domain, entries in data.items() if domain.startswith("py:") for name in entries}


@functools.cache
def _resolve(dotted: str) -> object:
    """The object a dotted name points to: modules (imported when needed) then attributes, left to right."""
    parts = dotted.split(".")
    obj = importlib.import_module(parts[0])
    for i, part in enumerate(parts[1:], start=2):
        path = ".".join(parts[:i])
        if path in sys.modules:
            obj = sys.modules[path]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            obj = importlib.import_module(path)
    return obj


def test_site_builds_without_warnings_and_broken_links(built_site: subprocess.CompletedProcess) -> None:
    output = built_site.stdout + built_site.stderr
    assert built_site.returncode == 0, output  # sphinx-build -W: any warning fails the build
    assert "check_links: 0 broken internal links" in output
    for page in ("index", "concepts", "api/buffer", "api/config", "notebooks/01_quickstart", "coming_from_sb3"):
        assert (HTML / f"{page}.html").is_file(), page


def test_every_seed_name_has_an_api_entry(inventory_names: Set[str]) -> None:
    """A seed name is in the reference under its own path, or (a re-export) as the same object under another."""
    seed_names = [line for line in SEED_NAMES.read_text().split() if line]
    assert len(seed_names) > 80
    by_last: Dict[str, List[str]] = {}
    for name in inventory_names:
        by_last.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    missing = []
    for name in seed_names:
        if name in inventory_names:
            continue
        target = _resolve(name)
        if not any(_resolve(other) is target for other in by_last.get(name.rsplit(".", 1)[-1], [])):
            missing.append(name)
    assert not missing, f"seed names without an entry in the API reference: {missing}"


#: Modules whose public classes and functions (their ``__all__``, else what they define) the reference must show.
#: A package's ``__all__`` covers its re-exports; the rest are modules users import by name.
PUBLIC_MODULES = [
    "rlightning",
    "rlightning.buffer",
    "rlightning.buffer.utils",
    "rlightning.types",
    "rlightning.utils.builders",
    "rlightning.utils.config",
    "rlightning.notebook",
    "rlightning.notebook.experiment",
    "rlightning.notebook.sweep_space",
    "rlightning.widgets",
    "rlightning.env",
    "rlightning.env.wrappers",
    "rlightning.env.action_masks",
    "rlightning.env.pomdp",
    "rlightning.env.suites",
    "rlightning.env.gymnax_env",
    "rlightning.policy",
    "rlightning.policy.algorithms",
    "rlightning.policy.networks",
    "rlightning.policy.networks.masks",
    "rlightning.policy.returns",
    "rlightning.policy.standalone",
    "rlightning.policy.export",
    "rlightning.engine",
    "rlightning.datasets",
    "rlightning.datasets.collect",
    "rlightning.env.turn_based_env",
    "rlightning.selfplay",
    "rlightning.selfplay.league",
    "rlightning.selfplay.matches",
]


def test_public_classes_and_functions_have_an_api_entry(inventory_names: Set[str]) -> None:
    by_last: Dict[str, List[str]] = {}
    for name in inventory_names:
        by_last.setdefault(name.rsplit(".", 1)[-1], []).append(name)
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [
            n for n, obj in vars(module).items() if getattr(obj, "__module__", None) == module_name
        ]
        for name in names:
            obj = getattr(module, name)
            if name.startswith("_") or not (inspect.isclass(obj) or inspect.isroutine(obj)):
                continue  # constants are shown where they have a doc comment
            if f"{module_name}.{name}" in inventory_names:
                continue
            if not any(_resolve(other) is obj for other in by_last.get(name, [])):
                missing.append(f"{module_name}.{name}")
    assert not missing, f"public classes and functions without an entry in the API reference: {missing}"


def test_config_fields_show_docstring_and_default(built_site: subprocess.CompletedProcess) -> None:
    text = (HTML / "api" / "policy.html").read_text()
    entry = re.search(r'id="rlightning\.policy\.algorithms\.PPOConfig\.clip_coef".*?</dd>', text, re.S)
    assert entry, "PPOConfig.clip_coef has no entry"
    from rlightning.policy.algorithms import PPOConfig

    field = PPOConfig.model_fields["clip_coef"]
    assert field.description and field.description.split()[0] in entry.group(0)  # the field's docstring
    default = re.escape(repr(field.default))
    assert re.search(rf"Default:\s*<code[^>]*><span[^>]*>{default}</span>", entry.group(0)), entry.group(0)
    config = (HTML / "api" / "config.html").read_text()
    assert re.search(r'id="rlightning\.utils\.config\.EnvConfig\.num_envs".*?Default:', config, re.S)


def test_every_config_field_has_an_entry_with_its_default(built_site: subprocess.CompletedProcess) -> None:
    """Each field of each config class, under the class that declares it (or a public subclass, when that class is
    private), with ``Default:`` and the first word of its docstring."""
    from pydantic import BaseModel
    from sphinx.pycode import ModuleAnalyzer

    from rlightning.utils import config

    pages = "\n".join(p.read_text() for p in (HTML / "api").glob("*.html"))
    entries = {m.group(1): m.start() for m in re.finditer(r'<dt[^>]*id="([^"]+)"', pages)}
    configs = {
        obj
        for module in ("rlightning.utils.config", "rlightning.policy.algorithms", "rlightning.policy")
        for obj in vars(importlib.import_module(module)).values()
        if isinstance(obj, type) and issubclass(obj, BaseModel) and obj.__module__.startswith("rlightning")
    }
    assert config.MainConfig in configs and len(configs) > 20
    analyzers: Dict[str, Dict] = {}
    missing, bare = [], []
    for cls in sorted(configs, key=lambda c: c.__qualname__):
        for field in cls.model_fields:
            owner = next(c for c in cls.__mro__ if field in vars(c).get("__annotations__", {}))
            shown = cls if owner.__name__.startswith("_") else owner
            ids = [i for i in entries if i.endswith(f".{shown.__qualname__}.{field}")]
            if not ids:
                missing.append(f"{shown.__qualname__}.{field}")
                continue
            entry = pages[entries[ids[0]] :].split("</dd>", 1)[0]
            docs = analyzers.setdefault(owner.__module__, ModuleAnalyzer.for_module(owner.__module__).find_attr_docs())
            doc = docs.get((owner.__qualname__, field))
            word = re.search(r"[A-Za-z]{3,}", " ".join(doc or []))
            first = word.group(0) if word else None
            if "Default:" not in entry or (first and first not in entry):
                bare.append(f"{shown.__qualname__}.{field}")
    assert not missing, f"config fields without an entry: {missing}"
    assert not bare, f"config field entries without their default or docstring: {bare}"


def test_notebook_pages_carry_their_widget_state(built_site: subprocess.CompletedProcess) -> None:
    """Widgets render from the state saved in the notebook (the page embeds it with the widget manager)."""
    for page in ("notebooks/01_quickstart.html", "notebooks/course/01_returns.html"):
        text = (HTML / page).read_text()
        assert '<script type="application/vnd.jupyter.widget-state+json">' in text, page
        assert "application/vnd.jupyter.widget-view+json" in text, page


def test_pages_load_nothing_from_outside_the_site(built_site: subprocess.CompletedProcess) -> None:
    """No script, stylesheet or image of any page comes from another host: the widget manager and RequireJS are
    served with the site, the math is MathML made at build time."""
    outside = re.compile(r'<(?:script|link|img)\b[^>]*\b(?:src|href)="(?:https?:)?//[^"]*"')
    pages = list(HTML.rglob("*.html"))
    assert len(pages) > 30
    loads = {str(p.relative_to(HTML)): outside.findall(p.read_text()) for p in pages}
    assert not {page: found for page, found in loads.items() if found}
    course = (HTML / "notebooks" / "course" / "01_returns.html").read_text()
    assert "<math" in course and not re.search(r"<script[^>]*mathjax", course, re.I)
    assert "_static/jupyter-widgets/embed-amd.js" in course and (HTML / "_static" / "require.js").is_file()


def test_storage_entry_in_the_seed_shape(built_site: subprocess.CompletedProcess) -> None:
    text = (HTML / "api" / "buffer.html").read_text()
    entry = re.search(r'<dt[^>]*id="rlightning\.buffer\.utils\.Storage".*?</dt>', text, re.S)
    assert entry, "no entry for rlightning.buffer.utils.Storage"
    assert "capacity" in entry.group(0) and "viewcode-link" in entry.group(0)  # signature and [source]
    assert "Bases: <code" in text and "add_transition" in text


@contextlib.contextmanager
def _serve(folder: Path) -> Iterator[str]:
    """Serve ``folder`` over HTTP on a free loopback port; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@pytest.mark.browser
def test_pages_render_in_chromium(built_site: subprocess.CompletedProcess, tmp_path: Path) -> None:
    assert built_site.returncode == 0, built_site.stdout + built_site.stderr
    chromium = find_chromium()
    if chromium is None:
        pytest.skip("Chromium not found (apt-get install chromium, or set RLIGHTNING_CHROMIUM)")
    sync_api = pytest.importorskip("playwright.sync_api")
    shots = Path(os.environ.get("RLIGHTNING_DOCS_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    failed: List[str] = []
    outside: List[str] = []
    with _serve(HTML) as base, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        # Nothing leaves the machine: a request to another host is refused (and would be reported below).
        page.route(
            re.compile(r"^https?://(?!127\.0\.0\.1)"), lambda route: (outside.append(route.request.url), route.abort())
        )
        page.on("requestfailed", lambda r: failed.append(r.url) if r.url.startswith(base) else None)

        page.goto(f"{base}/index.html")
        assert "rlightning" in page.title()
        assert page.locator("nav a", has_text="API reference").count() >= 1
        assert page.locator("h1", has_text="rlightning").is_visible()
        page.screenshot(path=str(shots / "index.png"))

        page.goto(f"{base}/api/buffer.html#rlightning.buffer.utils.Storage")
        storage = page.locator('dt[id="rlightning.buffer.utils.Storage"]')
        assert storage.is_visible()
        assert "Storage" in storage.inner_text() and "[source]" in storage.inner_text()
        assert page.locator('dt[id="rlightning.buffer.utils.Storage.add_transition"]').count() == 1
        page.evaluate("window.scrollBy(0, -120)")  # the class line, not hidden under the sticky header
        page.screenshot(path=str(shots / "storage.png"))

        page.goto(f"{base}/notebooks/01_quickstart.html")
        page.wait_for_load_state("load")
        assert page.locator(".cell_output").count() >= 5
        loaded = page.evaluate(
            "() => Array.from(document.querySelectorAll('.cell_output img')).filter(i => i.naturalWidth > 0).length"
        )
        assert loaded >= 1, "no plot of the notebook's stored outputs was displayed"
        page.locator(".cell_output img").first.scroll_into_view_if_needed()
        page.screenshot(path=str(shots / "notebook.png"), full_page=False)

        # With every other host refused: the saved widgets are drawn (the slider) and the math is laid out.
        page.goto(f"{base}/notebooks/course/01_returns.html")
        slider = page.locator(".widget-slider").first
        slider.wait_for(state="visible", timeout=20_000)
        maths = page.locator("math")
        assert maths.count() >= 10 and maths.first.bounding_box()["height"] > 5
        slider.scroll_into_view_if_needed()
        page.evaluate("window.scrollBy(0, -300)")
        page.screenshot(path=str(shots / "course.png"), full_page=False)
        browser.close()
    assert not failed, f"pages of the site that did not load: {failed}"
    assert not outside, f"requests to other hosts (the site must open offline): {sorted(set(outside))}"
    assert all((shots / f"{name}.png").stat().st_size > 10_000 for name in ("index", "storage", "notebook", "course"))
    if shots != tmp_path:
        shutil.copytree(shots, tmp_path / "screenshots", dirs_exist_ok=True)
