"""A policy's observation batch from EnvRets: structured like the space, checked with errors that name the env."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces

from rlightning.policy.observations import obs_rows, writable
from rlightning.types.convert import concat_rows, leading_rows

SPACE = spaces.Dict(
    {"pos": spaces.Box(-1, 1, (3,), np.float32), "inner": spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(4)))}
)


def _obs(n: int):
    return {"pos": np.zeros((n, 3), np.float32), "inner": (np.zeros(n, np.int64), np.zeros((n, 4), np.int8))}


def test_structured_batches_concatenate_leaf_by_leaf():
    a, b = obs_rows(_obs(2), SPACE, "e-0", "observation"), obs_rows(_obs(3), SPACE, "e-1", "observation")
    both = concat_rows([a, b])
    assert leading_rows(both) == 5 and both["pos"].shape == (5, 3) and both["inner"][1].shape == (5, 4)
    frozen = np.zeros((2, 3), np.float32)
    frozen.flags.writeable = False
    assert writable({"pos": frozen})["pos"].flags.writeable


def test_bad_observations_name_the_env_the_entry_and_what_is_expected():
    with pytest.raises(TypeError, match=r"EnvRet 'e-0': observation is a ndarray, the Dict observation space needs"):
        obs_rows(np.zeros((2, 3)), SPACE, "e-0", "observation")
    with pytest.raises(KeyError, match=r"lacks keys \['inner'\] of its Dict space"):
        obs_rows({"pos": np.zeros((2, 3), np.float32)}, SPACE, "e-0", "observation")
    bad = _obs(2)
    bad["pos"] = np.zeros((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"observation\['pos'\] shape \(2, 4\) is not \[num_envs, \*\(3,\)\]"):
        obs_rows(bad, SPACE, "e-0", "observation")
    with pytest.raises(TypeError, match=r"needs a tuple of 2 entries for its Tuple space"):
        obs_rows({"pos": np.zeros((2, 3), np.float32), "inner": np.zeros(2)}, SPACE, "e-0", "observation")
