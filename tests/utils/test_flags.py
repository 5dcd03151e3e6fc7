"""`InternalFlag`: the seed's view of ``RLIGHTNING_*``, read at every access."""

import os
import subprocess
import sys

import pytest

from rlightning.utils.config import ClusterConfig
from rlightning.utils.utils import InternalFlag, _read_bool


@pytest.fixture
def clean_flags(monkeypatch):
    """Every RLIGHTNING_* flag variable unset for the test, and restored afterwards (set() writes os.environ)."""
    for name in InternalFlag.NAMES:
        monkeypatch.setenv(f"RLIGHTNING_{name}", "0")
        monkeypatch.delenv(f"RLIGHTNING_{name}")
    return monkeypatch


def test_set_and_env_vars(remote_flags):
    remote_flags(REMOTE_ENV=True, REMOTE_TRAIN=False)
    assert InternalFlag.REMOTE_ENV is True
    env = InternalFlag.get_env_vars()
    assert env["RLIGHTNING_REMOTE_ENV"] == "1" and env["RLIGHTNING_REMOTE_TRAIN"] == "0"
    assert set(env) == {f"RLIGHTNING_{n}" for n in InternalFlag.NAMES}


def test_reload_reads_environment(monkeypatch, remote_flags):
    remote_flags(REMOTE_EVAL=False)
    monkeypatch.setenv("RLIGHTNING_REMOTE_EVAL", "yes")
    InternalFlag.reload()
    assert InternalFlag.REMOTE_EVAL is True


def test_from_cluster_config(remote_flags):
    remote_flags(REMOTE_STORAGE=False)
    InternalFlag.from_cluster_config(ClusterConfig(remote_storage=True, remote_env=True))
    assert InternalFlag.REMOTE_STORAGE and InternalFlag.REMOTE_ENV and not InternalFlag.REMOTE_TRAIN


def test_bad_flag_names_and_values(monkeypatch):
    with pytest.raises(KeyError, match="unknown InternalFlag 'REMOTE_GPU'; valid flags: DEBUG"):
        InternalFlag.set(REMOTE_GPU=True)
    with pytest.raises(TypeError, match="must be a bool"):
        InternalFlag.set(DEBUG="yes")
    monkeypatch.setenv("RLIGHTNING_X", "maybe")
    with pytest.raises(ValueError, match="RLIGHTNING_X='maybe' is not a boolean"):
        _read_bool("RLIGHTNING_X", False)


def test_a_variable_set_after_import_takes_effect_at_the_next_read(clean_flags):
    assert InternalFlag.REMOTE_ENV is False  # unset reads False
    clean_flags.setenv("RLIGHTNING_REMOTE_ENV", "on")
    assert InternalFlag.REMOTE_ENV is True
    assert InternalFlag.snapshot()["REMOTE_ENV"] is True
    assert InternalFlag.get_env_vars()["RLIGHTNING_REMOTE_ENV"] == "1"
    clean_flags.setenv("RLIGHTNING_REMOTE_ENV", "False")
    assert InternalFlag.REMOTE_ENV is False
    clean_flags.delenv("RLIGHTNING_REMOTE_ENV")
    assert InternalFlag.REMOTE_ENV is False
    assert "REMOTE_ENV=False" in repr(InternalFlag)


def test_an_invalid_value_raises_the_clear_error_on_access(clean_flags):
    clean_flags.setenv("RLIGHTNING_REMOTE_TRAIN", "maybe")
    with pytest.raises(ValueError, match="RLIGHTNING_REMOTE_TRAIN='maybe' is not a boolean; use one of 1/0"):
        InternalFlag.REMOTE_TRAIN  # noqa: B018
    with pytest.raises(ValueError, match="RLIGHTNING_REMOTE_TRAIN='maybe' is not a boolean"):
        InternalFlag.get_env_vars()
    with pytest.raises(ValueError, match="RLIGHTNING_REMOTE_TRAIN='maybe'"):
        InternalFlag.reload()
    assert InternalFlag.REMOTE_EVAL is False  # the other flags still read


def test_set_and_assignment_export_the_variable(clean_flags):
    InternalFlag.set(remote_storage=True)
    assert os.environ["RLIGHTNING_REMOTE_STORAGE"] == "1" and InternalFlag.REMOTE_STORAGE is True
    InternalFlag.REMOTE_STORAGE = False  # the seed style: an assignment is an export, not a shadowing attribute
    assert os.environ["RLIGHTNING_REMOTE_STORAGE"] == "0"
    clean_flags.setenv("RLIGHTNING_REMOTE_STORAGE", "1")
    assert InternalFlag.REMOTE_STORAGE is True  # still read from the environment after the assignment
    with pytest.raises(TypeError, match="InternalFlag REMOTE_ENV must be a bool, got 1"):
        InternalFlag.REMOTE_ENV = 1
    assert "RLIGHTNING_REMOTE_ENV" not in os.environ


def test_set_checks_every_flag_before_exporting_any(clean_flags):
    with pytest.raises(KeyError, match="unknown InternalFlag 'REMOTE_GPU'"):
        InternalFlag.set(REMOTE_ENV=True, REMOTE_GPU=True)
    assert "RLIGHTNING_REMOTE_ENV" not in os.environ and InternalFlag.REMOTE_ENV is False


def test_unknown_attribute_names_the_flags():
    with pytest.raises(AttributeError, match="InternalFlag has no attribute 'REMOTE_GPU'; flags: DEBUG, VERBOSE"):
        InternalFlag.REMOTE_GPU  # noqa: B018
    assert set(InternalFlag.NAMES) <= set(dir(InternalFlag))


def test_a_bad_variable_does_not_break_the_import():
    env = dict(os.environ, RLIGHTNING_DEBUG="maybe")
    code = (
        "from rlightning.utils.utils import InternalFlag\n"
        "try:\n    InternalFlag.DEBUG\nexcept ValueError as e:\n    print('raised:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "raised: environment variable RLIGHTNING_DEBUG='maybe' is not a boolean" in out.stdout
