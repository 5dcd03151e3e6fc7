import time

import pytest

from rlightning.notebook import ClusterConnectionError, Lab
from rlightning.utils.config import PolicyConfig


def test_connect_to_nothing_fails_fast_naming_the_address():
    t0 = time.monotonic()
    with pytest.raises(ClusterConnectionError, match=r"no Ray cluster answers at '127\.0\.0\.1:1'"):
        Lab.connect("127.0.0.1:1", timeout_s=2)
    assert time.monotonic() - t0 < 30


def test_connect_bad_address_format():
    with pytest.raises(ValueError, match=r"cluster address 'nowhere' must look like 'host:port'"):
        Lab.connect("nowhere")


@pytest.mark.ray
def test_local_lab_reuses_runtime_and_renders(ray_runtime):
    lab = Lab.local()
    try:
        assert Lab.local() is lab  # a re-run cell gets the same Lab
        info = lab.cluster_info()
        assert info["cpus"] == 8 and info["gpus"] == 0 and info["nodes"] == 1
        html = lab._repr_html_()
        assert "CPUs" in html and "GPUs" in html and "runs started here" in html
        assert "8 CPUs" in repr(lab)
        assert lab.is_open
    finally:
        lab.shutdown()
    assert not lab.is_open
    assert ray_runtime.is_initialized()  # the session's lease is untouched
    assert "shut down" in repr(lab)
    with pytest.raises(RuntimeError, match="this Lab was shut down"):
        lab.build(None)


@pytest.mark.ray
def test_gpus_on_a_cluster_without_them(ray_runtime):
    lab = Lab.local()
    try:
        with pytest.raises(ValueError, match=r"asks for 2 GPU\(s\) but the cluster has 0"):
            lab.policy_group(PolicyConfig(), gpus=1)
    finally:
        lab.shutdown()


@pytest.mark.ray
def test_build_rejects_non_config(ray_runtime):
    lab = Lab.local()
    try:
        with pytest.raises(TypeError, match="Lab.build expects a MainConfig"):
            lab.build({"engine": "syncrl"})
    finally:
        lab.shutdown()


@pytest.mark.ray
def test_lab_pieces_take_their_placement_from_arguments_not_flags(ray_runtime, monkeypatch):
    import os

    from rlightning.utils.config import BufferConfig, ClusterConfig, EnvConfig
    from rlightning.utils.utils import InternalFlag

    for name in InternalFlag.NAMES:
        monkeypatch.setenv(f"RLIGHTNING_{name}", "0")
    before = {k: v for k, v in os.environ.items() if k.startswith("RLIGHTNING_")}
    lab = Lab.local()
    try:
        remote_envs = lab.env_group(EnvConfig(num_envs=1, num_cpus=0.25), name="remote_envs")
        local_envs = lab.env_group(EnvConfig(num_envs=1), name="local_envs", remote=False)
        assert remote_envs.is_remote is True and local_envs.is_remote is False
        local_buffer = lab.data_buffer(BufferConfig(capacity=16), name="local_buffer", remote=False)
        local_buffer.init(local_envs.env_metas)
        remote_buffer = lab.data_buffer(BufferConfig(capacity=16), name="remote_buffer")
        remote_buffer.init(remote_envs.env_metas, storage_options={"num_cpus": 0.25})
        assert local_buffer.is_remote is False and remote_buffer.is_remote is True
        policies = lab.policy_group(PolicyConfig(), ClusterConfig(eval_each_cpu_num=0.25), remote=False)
        assert not any(w.is_remote for w in policies.train_workers + policies.eval_workers)
        assert {k: v for k, v in os.environ.items() if k.startswith("RLIGHTNING_")} == before  # no flag flipped
        with pytest.raises(TypeError, match=r"remote must be True \(Ray actors\) or False \(in this process\), got 1"):
            lab.env_group(EnvConfig(), name="bad", remote=1)
    finally:
        lab.shutdown()
