"""Check the built site's internal links: every relative link points to a page that exists, and its
``#fragment`` (if any) to an id on that page. External links (``http(s):``, ``mailto:``) are not checked:
the build machine has no network.

Usage: ``python docs/_ext/check_links.py docs/_build/html`` (exit status 1 and one line per broken link).
"""

from __future__ import annotations

import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Dict, List, Set, Tuple
from urllib.parse import unquote, urlsplit

EXTERNAL = ("http:", "https:", "mailto:", "data:", "javascript:", "ftp:")


class _Page(HTMLParser):
    """The ids and the links (``href`` and ``src``) of one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: Set[str] = set()
        self.links: List[str] = []

    def handle_starttag(self, tag: str, attrs: List[Tuple[str, str | None]]) -> None:
        for key, value in attrs:
            if value is None:
                continue
            if key in ("id", "name"):
                self.ids.add(value)
            elif (key == "href" and tag in ("a", "link")) or (key == "src" and tag in ("img", "script")):
                self.links.append(value)


def _parse(path: Path, cache: Dict[Path, _Page]) -> _Page:
    if path not in cache:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def broken_links(root: Path) -> List[str]:
    """One line per broken internal link in the HTML pages under ``root``."""
    root = root.resolve()
    cache: Dict[Path, _Page] = {}
    problems: List[str] = []
    # _static holds the theme's own template fragments (Jinja, not pages).
    pages = sorted(p for p in root.rglob("*.html") if "_static" not in p.relative_to(root).parts)
    for page_path in pages:
        for link in _parse(page_path, cache).links:
            if not link or link.startswith(EXTERNAL) or link.startswith("//"):
                continue
            parts = urlsplit(link)
            target = page_path if not parts.path else (page_path.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = f"{page_path.relative_to(root)}: {link}"
            if not target.exists():
                problems.append(f"{where} (no file {target.name})")
            elif parts.fragment and target.suffix == ".html":
                if unquote(parts.fragment) not in _parse(target, cache).ids:
                    problems.append(f"{where} (no id {parts.fragment!r} in {target.name})")
    return problems


def main(argv: List[str]) -> int:
    """Print the broken links of the site in ``argv[0]``; exit status 1 if there are any."""
    root = Path(argv[0] if argv else "docs/_build/html")
    if not (root / "index.html").exists():
        print(f"check_links: no built site in {root} (index.html missing)")
        return 2
    problems = broken_links(root)
    for line in problems:
        print(f"broken link: {line}")
    print(f"check_links: {len(problems)} broken internal links")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
