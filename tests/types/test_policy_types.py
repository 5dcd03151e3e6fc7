import gymnasium as gym
import numpy as np
import pytest
import torch

from rlightning.types import MultiAgentPolicyResponse, PolicyResponse


def test_simple_namespace_with_env_id():
    r = PolicyResponse(env_id="e0", action=np.array([1]), value=np.array([0.5]))
    assert r.env_id == "e0" and r.action[0] == 1
    r.weight_version = 3
    r.ts_env_sent_ns = 10
    assert set(r.to_dict()) == {"action", "value"}


def test_conversions_skip_metadata():
    r = PolicyResponse(env_id="e0", action=torch.ones(2), extra={"h": torch.zeros(1)}, weight_version=2)
    r.numpy()
    assert isinstance(r.action, np.ndarray) and isinstance(r.extra["h"], np.ndarray)
    assert r.weight_version == 2


def test_policy_sent_latency_prefers_policy_stamp():
    r = PolicyResponse(env_id="e", action=0, ts_env_sent_ns=1_000_000_000)
    assert r.compute_sent_latency(now_ns=2_000_000_000) == pytest.approx(1.0)
    r.ts_policy_sent_ns = 1_500_000_000
    assert r.compute_sent_latency(now_ns=2_000_000_000) == pytest.approx(0.5)
    assert PolicyResponse(env_id="e").compute_sent_latency() == 0.0
    assert r.mark_policy_sent().ts_policy_sent_ns > 1_500_000_000


def test_make_example_samples_from_space():
    space = gym.spaces.Discrete(3)
    r = PolicyResponse.make_example(space, env_id="e", note=1)
    assert space.contains(r.action) and r.note == 1 and r.env_id == "e"


def test_multi_agent_make_example():
    spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(-1, 1, (2,))}
    r = MultiAgentPolicyResponse.make_example(spaces, env_id="m")
    assert isinstance(r, PolicyResponse)
    assert set(r.action) == {"a", "b"}
    assert spaces["a"].contains(r.action["a"]) and spaces["b"].contains(r.action["b"])
    with pytest.raises(TypeError, match="expects a dict of agent id -> action space"):
        MultiAgentPolicyResponse.make_example(gym.spaces.Discrete(2))
