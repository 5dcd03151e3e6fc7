import time

import numpy as np
import pytest
import torch

from rlightning.types import EnvMeta, EnvRet, MultiAgentEnvRet


def test_defaults_and_fields():
    ret = EnvRet(env_id="e0", observation=np.zeros(3))
    assert ret.last_reward == 0.0 and ret.last_terminated is False and ret.last_truncated is False
    assert ret.info == {} and ret.last_info is ret.info
    assert EnvRet.fields() == ("observation", "last_reward", "last_terminated", "last_truncated", "info")
    assert EnvRet.get_defaults() == {"last_reward": 0.0, "last_terminated": False, "last_truncated": False, "info": {}}
    assert abs(ret.ts_env_sent_ns - time.time_ns()) < 60e9


def test_to_dict_excludes_ids_and_flattens_extra():
    ret = EnvRet(env_id="e0", observation=1, last_reward=2.0, _extra={"mask": 7})
    d = ret.to_dict()
    assert "env_id" not in d and "ts_env_sent_ns" not in d
    assert d["mask"] == 7 and d["observation"] == 1 and d["last_reward"] == 2.0


def test_to_dict_extra_clash_is_key_error():
    ret = EnvRet(env_id="e0", observation=1, _extra={"last_reward": 3})
    with pytest.raises(KeyError, match="'last_reward' clashes with a field of EnvRet"):
        ret.to_dict()


def test_numpy_and_cpu_convert_nested():
    ret = EnvRet(
        env_id="e0",
        observation=torch.ones(2, 3),
        last_reward=torch.tensor([1.0, 2.0]),
        info={"nested": {"t": torch.zeros(2)}, "keep": "x"},
        _extra={"list": [torch.ones(1)]},
    )
    ret.numpy()
    assert isinstance(ret.observation, np.ndarray) and ret.observation.shape == (2, 3)
    assert isinstance(ret.info["nested"]["t"], np.ndarray)
    assert isinstance(ret._extra["list"][0], np.ndarray)
    assert ret.info["keep"] == "x"
    ret2 = EnvRet(env_id="e", observation=torch.ones(1)).cpu()
    assert ret2.observation.device.type == "cpu"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only error")
def test_cuda_without_cuda_is_clear():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        EnvRet(env_id="e", observation=torch.ones(1)).cuda()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_moves_arrays_and_tensors():
    ret = EnvRet(env_id="e", observation=np.ones(2, dtype=np.float32), info={"t": torch.ones(1)}).cuda()
    assert ret.observation.is_cuda and ret.info["t"].is_cuda


def test_latency():
    ret = EnvRet(env_id="e", observation=0)
    ret.ts_env_sent_ns = 1_000_000_000
    assert ret.compute_sent_latency(now_ns=3_500_000_000) == pytest.approx(2.5)
    ret.ts_env_sent_ns = None
    assert ret.compute_sent_latency() == 0.0
    ret.ts_env_sent_ns = -5
    assert ret.compute_sent_latency() == 0.0
    ret.ts_env_sent_ns = "junk"
    assert ret.compute_sent_latency() == 0.0
    before = ret.mark_env_sent().ts_env_sent_ns
    assert before > 0 and ret.compute_sent_latency() >= 0.0


def test_env_meta_defaults():
    m = EnvMeta()
    assert m.env_id is None and m.action_space is None and m.observation_space is None and m.num_envs is None


def test_multi_agent_env_ret():
    ret = MultiAgentEnvRet(
        env_id="m",
        observation={"a": np.zeros(2), "b": np.ones(2)},
        last_reward={"a": 1.0, "b": 0.0},
        last_terminated={"a": True, "b": False},
        last_truncated={"a": False, "b": False},
    )
    assert ret.agent_ids == ("a", "b")
    assert not ret.all_done()
    ret.last_truncated = {"a": False, "b": True}
    assert ret.all_done()
    assert isinstance(ret, EnvRet)
