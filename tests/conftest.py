"""Shared fixtures: one session-scoped Ray runtime with more logical CPUs than cores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Ray workers of the local runtime inherit this process's environment: make the
# test support modules (tests/support) importable there, and keep threads at one.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_DEDUP_LOGS", "0")
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


@pytest.fixture(scope="session")
def ray_runtime():
    """A local Ray runtime for the whole session (8 logical CPUs, so small topologies fit on two cores)."""
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    acquire_ray(num_cpus=8, num_gpus=0, include_dashboard=False, log_to_driver=False)
    import ray

    yield ray
    release_ray(force=True)


@pytest.fixture
def remote_flags():
    """Set InternalFlag REMOTE_* for one test and restore them afterwards."""
    from rlightning.utils.utils import InternalFlag

    before = InternalFlag.snapshot()

    def set_flags(**flags: bool) -> None:
        InternalFlag.set(**flags)

    yield set_flags
    InternalFlag.set(**{k: v for k, v in before.items()})


@pytest.fixture
def build():
    """Build a run from a config; closes every engine built by the test."""
    from rlightning.utils.builders import build_run

    engines = []

    def _build(cfg):
        parts = build_run(cfg)
        engines.append(parts.engine)
        return parts

    yield _build
    for e in engines:
        e.close()
