import pytest

from rlightning.utils.config import ClusterConfig
from rlightning.utils.utils import InternalFlag, _read_bool


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
