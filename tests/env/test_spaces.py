"""Tests of rlightning/env/utils/spaces.py: vectorised action checks."""

import numpy as np
import pytest
from gymnasium import spaces

from rlightning.env.utils.spaces import make_action_check


def test_discrete_accepts_a_valid_batch_unchanged():
    check = make_action_check(spaces.Discrete(3), 4, "e-0")
    action = np.array([0, 1, 2, 1])
    out = check(action)
    assert out is action


@pytest.mark.parametrize("bad", [3, -1])
def test_discrete_out_of_range_names_env_value_and_space(bad):
    check = make_action_check(spaces.Discrete(3), 4, "CartPole-v1-2")
    with pytest.raises(
        ValueError,
        match=rf"env CartPole-v1-2: action {bad} \(sub-env 2\) is outside the action space "
        r"Discrete\(3\); valid actions are 0..2",
    ):
        check(np.array([0, 1, bad, 1]))


def test_discrete_with_start_checks_the_shifted_range():
    check = make_action_check(spaces.Discrete(2, start=5), 2, "e-0")
    assert check(np.array([5, 6])).tolist() == [5, 6]
    with pytest.raises(ValueError, match=r"action 4 \(sub-env 0\).*valid actions are 5..6"):
        check(np.array([4, 6]))


def test_discrete_accepts_whole_floats_and_same_size_shapes():
    check = make_action_check(spaces.Discrete(2), 3, "e-0")
    out = check(np.array([[1.0], [0.0], [1.0]]))
    assert out.dtype == np.int64 and out.tolist() == [1, 0, 1]
    assert check([1, 1, 0]).tolist() == [1, 1, 0]


def test_discrete_rejects_fractions_and_wrong_shapes():
    check = make_action_check(spaces.Discrete(2), 3, "e-0")
    with pytest.raises(ValueError, match=r"action 0.5 \(sub-env 1\) is not a whole number"):
        check(np.array([1.0, 0.5, 0.0]))
    with pytest.raises(
        ValueError, match=r"action of shape \(2,\) does not fit 3 sub-environment\(s\).*expected shape \(3,\)"
    ):
        check(np.array([1, 0]))
    with pytest.raises(ValueError, match=r"dtype <U1 cannot be used with action space Discrete\(2\)"):
        check(np.array(["a", "b", "c"]))


def test_box_rejects_nan_and_shape_mismatch():
    space = spaces.Box(-2.0, 2.0, (1,), dtype=np.float32)
    check = make_action_check(space, 2, "Pendulum-v1-0")
    with pytest.raises(
        ValueError, match=r"env Pendulum-v1-0: action \[nan\] \(sub-env 1\) has a NaN or infinite value"
    ):
        check(np.array([[0.0], [np.nan]]))
    with pytest.raises(ValueError, match=r"action of shape \(3, 1\) does not fit 2 sub-environment"):
        check(np.zeros((3, 1)))


def test_box_out_of_bounds_pass_clip_raise():
    space = spaces.Box(-2.0, 2.0, (1,), dtype=np.float32)
    action = np.array([[3.0], [-1.0]], dtype=np.float32)
    assert make_action_check(space, 2, "e-0", "pass")(action).tolist() == [[3.0], [-1.0]]
    assert make_action_check(space, 2, "e-0", "clip")(action).tolist() == [[2.0], [-1.0]]
    with pytest.raises(ValueError, match=r"action \[3.0\] \(sub-env 0\) is outside the bounds of the action space Box"):
        make_action_check(space, 2, "e-0", "raise")(action)


def test_box_casts_to_the_space_dtype():
    space = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    out = make_action_check(space, 1, "e-0")(np.zeros((1, 2), dtype=np.float64))
    assert out.dtype == np.float32


def test_unknown_out_of_bounds_choice_is_rejected():
    with pytest.raises(
        ValueError, match=r"out_of_bounds_action must be one of \('pass', 'clip', 'raise'\), got 'wrap'"
    ):
        make_action_check(spaces.Discrete(2), 1, "e-0", "wrap")


def test_multi_discrete_and_multi_binary_ranges():
    md = make_action_check(spaces.MultiDiscrete([2, 3]), 2, "e-0")
    assert md(np.array([[1, 2], [0, 0]])).shape == (2, 2)
    with pytest.raises(ValueError, match=r"action \[1, 3\] \(sub-env 1\) is outside the action space MultiDiscrete"):
        md(np.array([[1, 2], [1, 3]]))
    mb = make_action_check(spaces.MultiBinary(3), 1, "e-0")
    with pytest.raises(ValueError, match=r"valid values are 0 and 1"):
        mb(np.array([[0, 2, 1]]))


def test_other_spaces_use_the_batched_contains():
    space = spaces.Tuple((spaces.Discrete(2), spaces.Discrete(2)))
    check = make_action_check(space, 2, "e-0")
    good = (np.array([0, 1]), np.array([1, 1]))
    assert check(good) is good
    with pytest.raises(ValueError, match=r"is outside the action space Tuple"):
        check((np.array([0, 5]), np.array([1, 1])))
