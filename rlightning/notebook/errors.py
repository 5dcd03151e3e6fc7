"""Errors a notebook user made, shown as one clear message instead of a page of internal frames.

`Lab.local` / `Lab.connect` install an IPython handler for rlightning's own input errors (config
errors, unknown names, a built config assigned, not enough CPUs/GPUs, an unreachable cluster,
a Lab without the Jobs API): the cell shows ``ConfigError: <message>`` and how to see the rest.

The cell still fails: the kernel reports an error (``ename``/``evalue`` in the cell's error output
and in the execute reply), so nbval, ``nbconvert --execute`` and "Run All" stop there as for any
other exception. Only the traceback shown is short. The full one stays available: ``%tb`` prints
it, and `full_traceback` returns it as text (also ``sys.last_traceback``).
"""

from __future__ import annotations

import sys
import traceback
from typing import Any, List, Optional, Tuple

from rlightning.utils.config import ConfigError

HINT = "(%tb shows the full traceback)"


class ResourceError(ValueError):
    """The cluster has not the CPUs or GPUs free that a build asks for."""


class JobsUnavailableError(RuntimeError):
    """The cluster offers no Ray Jobs API (no dashboard, or its packages are not installed)."""


def user_errors() -> Tuple[type, ...]:
    """The exception types shown short."""
    from rlightning.notebook.lab import ClusterConnectionError

    return (ConfigError, ResourceError, ClusterConnectionError, JobsUnavailableError)


def short_traceback(etype: type, value: BaseException) -> List[str]:
    """The structured traceback shown for a user error: its type and message, and the hint."""
    red, reset = "\x1b[0;31m", "\x1b[0m"
    return [f"{red}{etype.__name__}{reset}: {value}", HINT]


def full_traceback(value: Optional[BaseException] = None) -> str:
    """The whole traceback of ``value`` (default: the last exception a cell raised) as text."""
    if value is None:
        value = getattr(sys, "last_value", None)
        if value is None:
            return ""
    return "".join(traceback.format_exception(type(value), value, value.__traceback__))


def _short_handler(shell: Any, etype: type, value: BaseException, tb: Any, tb_offset: Any = None) -> List[str]:
    """IPython's custom handler: record the exception for ``%tb`` and show it as an error output, short.

    IPython has already marked the cell failed (``error_in_exec``) when it calls this; publishing the
    error through ``shell._showtraceback`` gives the front end the error output (``ename``, ``evalue``)
    and the execute reply the short traceback.
    """
    sys.last_type, sys.last_value, sys.last_traceback = etype, value, tb  # what %tb shows
    if sys.version_info >= (3, 12):
        sys.last_exc = value
    stb = short_traceback(etype, value)
    shell._showtraceback(etype, value, stb)
    return stb


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
