"""The env package never imports the policy package (DESIGN: `BaseEnv` is reset / step / metadata; the policy
side builds the copy an env worker acts with). Checked on the source, so a function-local import counts too."""

import ast
from pathlib import Path

import rlightning.env

ENV_DIR = Path(rlightning.env.__file__).parent
ROOT = ENV_DIR.parent.parent
FORBIDDEN = "rlightning.policy"


def _imported_names(source: str, module: str, is_package: bool):
    """(line, name) for every import in ``source`` (the module ``module``): statements at any depth, relative
    ones resolved, the names a ``from`` import takes, and ``import_module`` / ``__import__`` of a literal."""
    package = module.split(".") if is_package else module.split(".")[:-1]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            yield node.lineno, base
            for alias in node.names:  # `from rlightning import policy`
                yield node.lineno, f"{base}.{alias.name}"
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                yield node.lineno, node.args[0].value


def _policy_imports(source: str, module: str, is_package: bool = False):
    return sorted(
        (line, name)
        for line, name in _imported_names(source, module, is_package)
        if name == FORBIDDEN or name.startswith(FORBIDDEN + ".")
    )


def test_no_module_of_the_env_package_imports_the_policy_package():
    files = sorted(ENV_DIR.rglob("*.py"))
    assert ENV_DIR / "rollout_worker.py" in files and ENV_DIR / "utils" / "record_writer.py" in files
    found = []
    for path in files:
        parts = path.relative_to(ROOT).with_suffix("").parts
        is_package = parts[-1] == "__init__"
        module = ".".join(parts[:-1] if is_package else parts)
        found += [f"{module}:{line}: {name}" for line, name in _policy_imports(path.read_text(), module, is_package)]
    assert found == [], "rlightning.env imports rlightning.policy:\n" + "\n".join(found)


def test_the_scan_finds_every_form_of_import():
    """The check above can fail: each way of importing the policy package is found, look-alikes are not."""
    source = """
import rlightning.policy.base_policy
from rlightning import policy
from ..policy import networks

def attach():
    from rlightning.policy.base_policy import BasePolicy
    import importlib
    return importlib.import_module("rlightning.policy.algorithms")

import rlightning.policyish
from rlightning.env import acting_policy
from . import policy_copies
from .utils import policy
"""
    assert _policy_imports(source, "rlightning.env.probe") == [
        (2, "rlightning.policy.base_policy"),
        (3, "rlightning.policy"),
        (4, "rlightning.policy"),
        (4, "rlightning.policy.networks"),
        (7, "rlightning.policy.base_policy"),
        (7, "rlightning.policy.base_policy.BasePolicy"),
        (9, "rlightning.policy.algorithms"),
    ]
    # One level deeper, ``..policy`` is rlightning.env.policy: not the policy package.
    assert _policy_imports("from ..policy import networks", "rlightning.env.utils.probe") == []
    assert _policy_imports("from ...policy import networks", "rlightning.env.utils.probe") == [
        (1, "rlightning.policy"),
        (1, "rlightning.policy.networks"),
    ]
