"""The default pipeline functions name a wrong argument with a TypeError (issue 33)."""

import numpy as np
import pytest

from rlightning.buffer.utils.utils import (
    default_env_ret_preprocess_fn,
    default_policy_resp_preprocess_fn,
    default_preprocess_fn,
)
from rlightning.types import EnvRet, PolicyResponse


def _pair():
    flags = np.zeros(2, dtype=bool)
    ret = EnvRet("e-0", np.zeros((2, 3), np.float32), np.zeros(2, np.float32), flags, flags.copy(), {})
    return ret, PolicyResponse("e-0", action=np.zeros(2, np.int64))


@pytest.mark.parametrize("bad", ["obs", None, 3, {"observation": 1}])
def test_a_non_env_ret_is_a_type_error_naming_the_argument(bad):
    ret, resp = _pair()
    with pytest.raises(TypeError, match=r"default_env_ret_preprocess_fn: env_ret must be an EnvRet \(with env_id, "):
        default_env_ret_preprocess_fn(bad)
    with pytest.raises(
        TypeError, match=rf"default_preprocess_fn: env_ret must be an EnvRet .*got {type(bad).__name__}"
    ):
        default_preprocess_fn(bad, resp)


@pytest.mark.parametrize("bad", ["act", None, [0, 1]])
def test_a_non_policy_response_is_a_type_error_naming_the_argument(bad):
    ret, resp = _pair()
    with pytest.raises(TypeError, match=r"default_policy_resp_preprocess_fn: policy_resp must be a PolicyResponse"):
        default_policy_resp_preprocess_fn(bad)
    with pytest.raises(TypeError, match=r"default_preprocess_fn: policy_resp must be a PolicyResponse .*got "):
        default_preprocess_fn(ret, bad)
    step = default_preprocess_fn(ret, resp)  # the right types still pass
    assert set(step) >= {"obs", "reward", "terminated", "truncated", "action"}
