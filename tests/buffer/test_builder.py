import inspect

import pytest

from rlightning.buffer import ReplayBuffer, RolloutBuffer
from rlightning.buffer.builder import build_data_buffer
from rlightning.buffer.utils import utils as defaults
from rlightning.buffer.utils.preprocessors import IdentityPreprocessor
from rlightning.utils.config import BufferConfig


def test_signature_matches_the_seed():
    params = inspect.signature(build_data_buffer).parameters
    # the seed's parameters, in order; the placement arguments added after them are keyword-only
    assert [n for n, p in params.items() if p.kind is not p.KEYWORD_ONLY] == [
        "buffer_cls",
        "buffer_cfg",
        "obs_preprocessor",
        "reward_preprocessor",
        "env_ret_preprocess_fn",
        "policy_resp_preprocess_fn",
        "preprocess_fn",
        "postprocess_fn",
    ]
    assert params["obs_preprocessor"].default is defaults.default_obs_preprocessor
    assert params["postprocess_fn"].default is defaults.default_postprocess_fn


def test_builds_registered_buffers_with_the_pipeline():
    pre = IdentityPreprocessor()
    buf = build_data_buffer("replay", BufferConfig(type="replay"), obs_preprocessor=pre)
    assert isinstance(buf, ReplayBuffer) and buf.obs_preprocessor is pre
    assert isinstance(build_data_buffer("rollout", BufferConfig(sampler="all")), RolloutBuffer)
    with pytest.raises(KeyError, match=r"unknown buffer 'replai'\. Did you mean 'replay'"):
        build_data_buffer("replai", BufferConfig())
