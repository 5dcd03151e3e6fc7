"""Sphinx extension of the rlightning site: config fields with their defaults, shapes in docstrings.

- pydantic keeps a model's fields in ``model_fields`` rather than as class attributes, so autodoc finds a
  field's docstring in the source but no value. This adds ``Default: ...`` under each field's docstring
  (``required`` where there is none).
- The docstrings write array shapes as ``[B, *obs_shape]``, Markdown-style; reST would read the ``*`` as
  the start of an emphasis. A ``*`` right after ``[`` or ``, `` inside such a shape (outside literals) is escaped.
- napoleon reads an attribute docstring's first line ``text: more text`` as ``type: description``; this
  project's attribute docstrings never mean that (types come from the annotations), so such a docstring
  starts with an empty reST comment and is read as prose.
- A dataclass field listed in its class's ``Attributes:`` section and also given a docstring of its own
  would be described twice (napoleon's entry and autodoc's); the ``Attributes:`` line is dropped then.
- The docstrings show examples (a config's YAML, a few lines of code) as an indented block after a blank line,
  Markdown-style; reST would read a block quote (and warn when it nests). Such a block becomes a literal block.
- ``|x|`` in a docstring is an absolute value or a norm, never a reST substitution: its bars are escaped.
- Math is rendered at build time as MathML (``html_math_renderer = "mathml"``, by latex2mathml), which browsers
  display natively: the pages need no MathJax from a CDN. LaTeX that latex2mathml cannot convert is a warning.
- `BasePolicy`'s worker methods are defined in ``rlightning.policy.worker_api`` and bound onto the class, so
  their ``__qualname__`` (``BasePolicy.x``) does not resolve in their ``__module__``; sphinx-autodoc-typehints
  looks the class up there to tell a method's ``self``. Its handler runs with the method's module taken from
  the documented name for that one call.
- A config's entry lists its fields, not pydantic's ``BaseModel`` API (``model_config``, ``model_dump``, ...),
  also where a class is documented with its inherited members (the V-trace configs).
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
from typing import Any, List

from docutils import nodes
from pydantic import BaseModel
from pydantic_core import PydanticUndefined
from sphinx.errors import PycodeError
from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

logger = logging.getLogger(__name__)


def _default_text(field: Any) -> str:
    if field.default_factory is not None:
        try:
            value = field.default_factory()
        except TypeError:  # a factory that needs the validated data
            return "computed from the other fields"
        return f"``{value!r}`` (a new one per config)"
    if field.default is PydanticUndefined:
        return "required"
    return f"``{field.default!r}``"


def _add_default(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    if what != "attribute":
        return
    owner_name, _, field_name = name.rpartition(".")
    module_name, _, class_name = owner_name.rpartition(".")
    try:
        owner = getattr(importlib.import_module(module_name), class_name, None)
    except (ImportError, ValueError):
        return
    if not (isinstance(owner, type) and issubclass(owner, BaseModel)):
        return
    field = owner.model_fields.get(field_name)
    if field is None:
        return
    if lines and lines[-1].strip():
        lines.append("")
    lines.append(f"Default: {_default_text(field)}")


_SHAPE_STAR = re.compile(r"(\[[^\]`]*?(?:\[|, ))\*(?=\w)")


def _escape_shape_stars(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    for i, line in enumerate(lines):
        if "*" in line:
            parts = line.split("``")  # odd parts are inline literals: left as they are
            lines[i] = "``".join(_SHAPE_STAR.sub(r"\1\\*", p) if j % 2 == 0 else p for j, p in enumerate(parts))


_ATTR_LINE = re.compile(r"^(\s+)(\w+)(?: \(.*\))?:")


def _drop_attributes_with_own_docs(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    if what != "class" or not isinstance(obj, type):
        return
    try:
        attr_docs = ModuleAnalyzer.for_module(obj.__module__).find_attr_docs()
    except PycodeError:
        return
    own = {attr for (cls, attr) in attr_docs if cls == obj.__qualname__}
    out: List[str] = []
    in_section, dropping, indent = False, False, None
    for line in lines:
        if line.strip() == "Attributes:":
            in_section, indent = True, None
        elif in_section and line.strip() and not line.startswith(" "):
            in_section = False
        if in_section and (m := _ATTR_LINE.match(line)):
            indent = indent or m.group(1)
            if m.group(1) == indent:
                dropping = m.group(2) in own
        elif in_section and not line.strip():
            dropping = False
        if not dropping:
            out.append(line)
    lines[:] = out


def _no_inline_attribute_type(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    if what == "attribute" and lines and ":" in lines[0]:
        lines[:0] = ["..", ""]  # an empty reST comment: napoleon takes it as the line, nothing is rendered


_NAPOLEON_HEADERS = {
    "args",
    "arguments",
    "attributes",
    "example",
    "examples",
    "keyword args",
    "keyword arguments",
    "methods",
    "note",
    "notes",
    "other parameters",
    "parameters",
    "return",
    "returns",
    "raise",
    "raises",
    "references",
    "see also",
    "todo",
    "warning",
    "warnings",
    "warns",
    "yield",
    "yields",
}
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d+[.)]|#\.)\s")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _examples_as_literals(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    out: List[str] = []
    for i, line in enumerate(lines):
        if line.strip() and i >= 2 and not lines[i - 1].strip() and _indent(line) > 0:
            j = i - 2
            while j >= 0 and not lines[j].strip():
                j -= 1
            k = j
            while k > 0 and lines[k - 1].strip() and _indent(lines[k - 1]) == _indent(lines[j]):
                k -= 1  # the first line of the paragraph before
            prev = lines[j].rstrip() if j >= 0 else ""
            if (
                j >= 0
                and _indent(line) > _indent(lines[j])
                and not prev.endswith("::")
                and prev.strip().lower().rstrip(":") not in _NAPOLEON_HEADERS
                and not _LIST_ITEM.match(lines[k])
                and not prev.lstrip().startswith((".. ", ">>>", "..."))
            ):
                out += [" " * _indent(lines[j]) + "::", ""]
        out.append(line)
    lines[:] = out


_SUBSTITUTION = re.compile(r"(?<![\\|])\|([^\s|`][^|`]*?)?(?<=[^\s|`])\|(?!_)")


def _no_substitutions(app: Any, what: str, name: str, obj: Any, options: Any, lines: List[str]) -> None:
    for i, line in enumerate(lines):
        if "|" in line and not line.lstrip().startswith(("|", "+-")):
            parts = line.split("``")
            lines[i] = "``".join(
                _SUBSTITUTION.sub(lambda m: "\\" + m.group(0)[:-1] + "\\|", p) if j % 2 == 0 else p
                for j, p in enumerate(parts)
            )


def _skip_pydantic_members(app: Any, what: str, name: str, obj: Any, skip: bool, options: Any) -> Any:
    if what != "class":
        return None
    module = getattr(getattr(obj, "fget", obj), "__module__", None) or ""
    if module.split(".")[0] == "pydantic" or name.startswith("model_"):  # pydantic's namespace, not a field
        return True
    return None


def _mathml(latex: str, display: str, node: nodes.Element) -> str:
    from latex2mathml.converter import convert

    try:
        return convert(latex.strip(), display=display)
    except Exception as err:  # noqa: BLE001 - latex2mathml raises its own exception types per construct
        logger.warning("LaTeX that latex2mathml cannot convert (%s): %s", err, latex, location=node)
        return f"<code>{html.escape(latex)}</code>"


def _visit_math(self: Any, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math notranslate"))
    self.body.append(_mathml(node.astext(), "inline", node) + "</span>")
    raise nodes.SkipNode


def _visit_displaymath(self: Any, node: nodes.Element) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math notranslate"))
    if node.get("number"):
        self.body.append(f'<span class="eqno">({node["number"]})')
        self.add_permalink_ref(node, "Link to this equation")
        self.body.append("</span>")
    parts = [p for p in node.astext().split("\n\n") if p.strip()]
    self.body.append("".join(_mathml(p, "block", node) for p in parts) + "</div>\n")
    raise nodes.SkipNode


def _resolves(module: Any, path: List[str]) -> bool:
    for part in path:
        module = getattr(module, part, None)
        if module is None:
            return False
    return True


def _typehints_signature(app: Any, what: str, name: str, obj: Any, *args: Any) -> Any:
    import sphinx_autodoc_typehints

    target = getattr(inspect.unwrap(obj), "__func__", inspect.unwrap(obj)) if callable(obj) else None  # classmethods
    module = inspect.getmodule(target) if target is not None else None
    path = getattr(target, "__qualname__", "").split(".")[:-1]
    if what != "method" or module is None or not path or _resolves(module, path):
        return sphinx_autodoc_typehints.process_signature(app, what, name, obj, *args)
    saved = target.__module__
    target.__module__ = name.rsplit(".", len(path) + 1)[0]  # "rlightning.policy" of "rlightning.policy.BasePolicy.x"
    try:
        return sphinx_autodoc_typehints.process_signature(app, what, name, obj, *args)
    finally:
        target.__module__ = saved


def setup(app: Any) -> dict:
    """Register the docstring hooks."""
    app.add_html_math_renderer("mathml", (_visit_math, None), (_visit_displaymath, None))
    import sphinx_autodoc_typehints

    for listener in list(app.events.listeners.get("autodoc-process-signature", [])):
        if listener.handler is sphinx_autodoc_typehints.process_signature:
            app.disconnect(listener.id)
            app.connect("autodoc-process-signature", _typehints_signature, priority=listener.priority)
    app.connect("autodoc-process-docstring", _add_default)
    app.connect("autodoc-skip-member", _skip_pydantic_members)
    app.connect("autodoc-process-docstring", _drop_attributes_with_own_docs, priority=400)
    app.connect("autodoc-process-docstring", _no_inline_attribute_type, priority=400)  # before napoleon (500)
    app.connect("autodoc-process-docstring", _escape_shape_stars, priority=400)  # before the type hints parse it
    app.connect("autodoc-process-docstring", _no_substitutions, priority=400)
    app.connect("autodoc-process-docstring", _examples_as_literals, priority=600)  # after napoleon's sections
    return {"parallel_read_safe": True, "parallel_write_safe": True}
