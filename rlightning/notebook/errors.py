"""Errors a notebook user made, shown as one clear message instead of a page of internal frames.

`Lab.local` / `Lab.connect` install an IPython handler for rlightning's own input errors (config
errors, unknown names, a built config assigned, not enough CPUs/GPUs, an unreachable cluster):
the cell shows ``ConfigError: <message>`` and how to see the rest; ``%tb`` prints the full traceback.
"""

from __future__ import annotations

import sys
from typing import Any, Tuple

from rlightning.utils.config import ConfigError


class ResourceError(ValueError):
    """The cluster has not the CPUs or GPUs free that a build asks for."""


def user_errors() -> Tuple[type, ...]:
    """The exception types shown short."""
    from rlightning.notebook.lab import ClusterConnectionError

    return (ConfigError, ResourceError, ClusterConnectionError)


def _short_handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> None:
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # what %tb shows
    print(f"{etype.__name__}: {value}\n(%tb shows the full traceback)", file=sys.stderr)


def install_short_errors() -> bool:
    """Show rlightning's input errors short in the running IPython shell; False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.set_custom_exc(user_errors(), _short_handler)
    return True
