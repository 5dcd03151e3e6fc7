"""Tests of rlightning/env/utils/utils.py: the default preprocess function and env ids."""

import numpy as np
import pytest
import torch

from rlightning.env.utils.utils import default_env_preprocess_fn, make_env_id
from rlightning.types import MultiAgentPolicyResponse, PolicyResponse


def test_default_preprocess_returns_the_numpy_action():
    action = np.array([0, 1, 1])
    assert default_env_preprocess_fn(PolicyResponse("e-0", action=action)) is action


def test_default_preprocess_turns_tensors_and_lists_into_numpy():
    out = default_env_preprocess_fn(PolicyResponse("e-0", action=torch.tensor([1.5, -2.0])))
    assert isinstance(out, np.ndarray) and out.tolist() == [1.5, -2.0]
    assert default_env_preprocess_fn(PolicyResponse("e-0", action=[1, 0])).tolist() == [1, 0]


def test_default_preprocess_converts_multi_agent_actions_per_agent():
    resp = MultiAgentPolicyResponse("m-0", action={"a": torch.tensor([1]), "b": [2]})
    out = default_env_preprocess_fn(resp)
    assert set(out) == {"a", "b"}
    assert all(isinstance(v, np.ndarray) for v in out.values())
    assert out["b"].tolist() == [2]


def test_default_preprocess_without_action_names_the_env():
    with pytest.raises(AttributeError, match=r"PolicyResponse for env 'e-3' has no 'action' attribute"):
        default_env_preprocess_fn(PolicyResponse("e-3", value=np.zeros(1)))


@pytest.mark.parametrize(
    "name, index, expected",
    [
        ("CartPole-v1", 0, "CartPole-v1-0"),
        ("pkg.mod:MyEnv", 3, "pkg.mod.MyEnv-3"),
        ("ns/Env-v2", 1, "ns.Env-v2-1"),
    ],
)
def test_make_env_id_is_name_and_index_without_separators(name, index, expected):
    assert make_env_id(name, index) == expected
