"""pytest wiring for the documentation notebooks run by nbval (``--nbval-lax``).

Every notebook cell collected by nbval gets the ``notebook`` marker, so ``-m "not notebook"``
skips them. Ray workers started from the notebooks' kernels keep one thread each.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if str(getattr(item, "fspath", "")).endswith(".ipynb"):
            item.add_marker(pytest.mark.notebook)
