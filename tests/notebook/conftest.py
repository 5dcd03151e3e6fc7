"""One `ray start --head` cluster on 127.0.0.1 shared by the tests of separate clusters (each start costs ~30 s)."""

from __future__ import annotations

import pytest

from tests.support.cluster import ray_head


@pytest.fixture(scope="module")
def head_cluster():
    """``{"address": "127.0.0.1:port", "session": sid}`` of a head node started for this module."""
    info: dict = {}
    with ray_head(num_cpus=4, info=info) as address:
        info["address"] = address
        yield info
