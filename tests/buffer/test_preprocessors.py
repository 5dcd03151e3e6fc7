import gymnasium as gym
import numpy as np
import pytest
import torch

from rlightning.buffer.utils.preprocessors import (
    ComposePreprocessor,
    FlattenPreprocessor,
    IdentityPreprocessor,
    OneHotPreprocessor,
    RunningMeanStdPreprocessor,
    preprocessor_for_space,
)


def test_identity_flatten_onehot():
    x = np.ones((2, 3, 4), np.uint8)
    assert IdentityPreprocessor()(x) is x
    assert IdentityPreprocessor(np.float32)(x).dtype == np.float32
    assert FlattenPreprocessor()(torch.ones(2, 3, 4)).shape == (2, 12)
    assert OneHotPreprocessor(3)(np.array([2, 0])).tolist() == [[0, 0, 1], [1, 0, 0]]
    with pytest.raises(ValueError, match=r"OneHotPreprocessor\(n=3\) got values outside \[0, 3\): min 0, max 3"):
        OneHotPreprocessor(3)(np.array([0, 3]))
    with pytest.raises(ValueError, match=r"n must be a positive integer, got 0"):
        OneHotPreprocessor(0)


def test_running_mean_std_matches_batch_statistics():
    rng = np.random.default_rng(0)
    data = rng.normal(5.0, 3.0, size=(3000, 2))
    norm = RunningMeanStdPreprocessor(clip=None)
    for chunk in np.split(data, 30):
        norm(chunk)
    assert np.allclose(norm.mean, data.mean(0)) and np.allclose(norm.var, data.var(0))
    out = norm(data[:500])
    assert abs(out.mean()) < 0.2 and abs(out.std() - 1) < 0.1 and out.dtype == np.float32
    scale = RunningMeanStdPreprocessor(center=False, clip=None)
    r = scale(np.array([2.0, -2.0]))
    assert np.allclose(r, [1.0, -1.0], atol=1e-4)  # scaled, not centred
    frozen = RunningMeanStdPreprocessor(update=False)
    frozen.load_state_dict(norm.state_dict())
    assert frozen.count == norm.count
    with pytest.raises(KeyError, match=r"state is missing \['count', 'var'\]"):
        frozen.load_state_dict({"mean": 0})


def test_compose_and_space_helper():
    comp = ComposePreprocessor(FlattenPreprocessor(), None, lambda x: x * 2)
    assert comp(np.ones((2, 2, 2))).tolist() == [[2.0] * 4] * 2
    assert isinstance(preprocessor_for_space(gym.spaces.Discrete(4)), OneHotPreprocessor)
    assert isinstance(preprocessor_for_space(gym.spaces.Box(0, 1, (2, 2)), flatten=True), FlattenPreprocessor)
    with pytest.raises(TypeError, match=r"supports Box and Discrete spaces, got MultiBinary"):
        preprocessor_for_space(gym.spaces.MultiBinary(3))
