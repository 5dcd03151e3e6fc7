"""Vectorised action checks: one cheap check per batch of ``num_envs`` actions.

`make_action_check(space, num_envs, env_id, out_of_bounds)` returns a function
that takes the batched action a policy produced and returns the array the
vector env is stepped with, or raises ``ValueError`` naming the env, the
offending value and the space. The checks are numpy reductions over the whole
batch (a min/max for ``Discrete``), never a loop over sub-environments.

Box actions: a shape mismatch or a non-finite value always raises. What
happens to finite values outside the bounds is the config's
``out_of_bounds_action``: ``"pass"`` hands them to the env unchanged (most
gymnasium envs clip or saturate themselves), ``"clip"`` clips them here,
``"raise"`` rejects them.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium import spaces
from gymnasium.vector.utils import batch_space

ActionCheck = Callable[[Any], Any]

OUT_OF_BOUNDS_CHOICES = ("pass", "clip", "raise")


def _space_text(space: spaces.Space) -> str:
    return repr(space)


def _as_batch(action: Any, num_envs: int, item_shape: tuple, env_id: str, space: spaces.Space) -> np.ndarray:
    """``action`` as an array of shape ``(num_envs, *item_shape)``; a same-size array is reshaped."""
    arr = action if isinstance(action, np.ndarray) else np.asarray(action)
    want = (num_envs, *item_shape)
    if arr.shape != want:
        if arr.dtype != object and arr.size == int(np.prod(want)):
            return arr.reshape(want)
        raise ValueError(
            f"env {env_id}: action of shape {arr.shape} does not fit {num_envs} sub-environment(s) of "
            f"action space {_space_text(space)}; expected shape {want}"
        )
    return arr


def _first_bad(arr: np.ndarray, bad: np.ndarray) -> tuple:
    """(sub-env index, value) of the first offending element."""
    flat = np.flatnonzero(bad.reshape(bad.shape[0], -1).any(axis=1)) if bad.ndim > 1 else np.flatnonzero(bad)
    row = int(flat[0])
    value = arr[row]
    return row, value.tolist() if isinstance(value, np.ndarray) else value.item()


def _integral(arr: np.ndarray, env_id: str, space: spaces.Space, dtype: np.dtype) -> np.ndarray:
    """Integer actions as ``dtype``; float actions are accepted only when they hold whole numbers."""
    kind = arr.dtype.kind
    if kind in "iu":
        return arr if arr.dtype == dtype else arr.astype(dtype)
    if kind == "b":
        return arr.astype(dtype)
    if kind == "f":
        ok = np.isfinite(arr) & (arr == np.round(arr))
        if not ok.all():
            row, value = _first_bad(arr, ~ok)
            raise ValueError(
                f"env {env_id}: action {value!r} (sub-env {row}) is not a whole number, so it is outside the "
                f"action space {_space_text(space)}"
            )
        return arr.astype(dtype)
    raise ValueError(
        f"env {env_id}: action of dtype {arr.dtype} cannot be used with action space {_space_text(space)}; use integers"
    )


def _discrete_check(space: spaces.Discrete, num_envs: int, env_id: str) -> ActionCheck:
    low = int(space.start)
    high = int(space.start) + int(space.n) - 1
    dtype = np.dtype(space.dtype)
    shape = (num_envs,)
    # One pass: shifted to start at 0 and read as unsigned, negatives wrap to huge values.
    unsigned = np.dtype(f"u{dtype.itemsize}")
    span = unsigned.type(high - low + 1)

    def check(action: Any) -> np.ndarray:
        if type(action) is np.ndarray and action.dtype == dtype and action.shape == shape:
            arr = action
        else:
            arr = _integral(_as_batch(action, num_envs, (), env_id, space), env_id, space, dtype)
        shifted = arr if low == 0 else arr - low
        if np.count_nonzero(shifted.view(unsigned) >= span):
            row, value = _first_bad(arr, (arr < low) | (arr > high))
            raise ValueError(
                f"env {env_id}: action {value!r} (sub-env {row}) is outside the action space "
                f"{_space_text(space)}; valid actions are {low}..{high}"
            )
        return arr

    return check


def _multi_discrete_check(space: spaces.MultiDiscrete, num_envs: int, env_id: str) -> ActionCheck:
    low = np.asarray(space.start)
    high = low + np.asarray(space.nvec) - 1
    dtype = np.dtype(space.dtype)

    def check(action: Any) -> np.ndarray:
        arr = _integral(_as_batch(action, num_envs, space.shape, env_id, space), env_id, space, dtype)
        bad = (arr < low) | (arr > high)
        if bad.any():
            row, value = _first_bad(arr, bad)
            raise ValueError(
                f"env {env_id}: action {value!r} (sub-env {row}) is outside the action space {_space_text(space)}"
            )
        return arr

    return check


def _multi_binary_check(space: spaces.MultiBinary, num_envs: int, env_id: str) -> ActionCheck:
    dtype = np.dtype(space.dtype)

    def check(action: Any) -> np.ndarray:
        arr = _integral(_as_batch(action, num_envs, space.shape, env_id, space), env_id, space, dtype)
        bad = (arr != 0) & (arr != 1)
        if bad.any():
            row, value = _first_bad(arr, bad)
            raise ValueError(
                f"env {env_id}: action {value!r} (sub-env {row}) is outside the action space "
                f"{_space_text(space)}; valid values are 0 and 1"
            )
        return arr

    return check


def _box_check(space: spaces.Box, num_envs: int, env_id: str, out_of_bounds: str) -> ActionCheck:
    low = space.low
    high = space.high
    dtype = np.dtype(space.dtype)
    bounded = bool(np.isfinite(low).any() or np.isfinite(high).any())

    def check(action: Any) -> np.ndarray:
        arr = _as_batch(action, num_envs, space.shape, env_id, space)
        if arr.dtype != dtype:
            if arr.dtype.kind not in "biuf":
                raise ValueError(
                    f"env {env_id}: action of dtype {arr.dtype} cannot be used with action space "
                    f"{_space_text(space)}; use {dtype}"
                )
            arr = arr.astype(dtype)
        if not np.isfinite(arr).all():
            row, value = _first_bad(arr, ~np.isfinite(arr))
            raise ValueError(
                f"env {env_id}: action {value!r} (sub-env {row}) has a NaN or infinite value; it is outside the "
                f"action space {_space_text(space)}"
            )
        if bounded and out_of_bounds != "pass":
            if out_of_bounds == "clip":
                return np.clip(arr, low, high)
            bad = (arr < low) | (arr > high)
            if bad.any():
                row, value = _first_bad(arr, bad)
                raise ValueError(
                    f"env {env_id}: action {value!r} (sub-env {row}) is outside the bounds of the action space "
                    f"{_space_text(space)} (low={low.tolist()}, high={high.tolist()})"
                )
        return arr

    return check


def _generic_check(space: spaces.Space, num_envs: int, env_id: str) -> ActionCheck:
    try:
        batched = batch_space(space, num_envs)
    except Exception:  # noqa: BLE001 - a space gymnasium cannot batch: leave the check to the env
        return lambda action: action

    def check(action: Any) -> Any:
        if not batched.contains(action):
            raise ValueError(
                f"env {env_id}: action {action!r} is outside the action space {_space_text(space)} "
                f"batched over {num_envs} sub-environment(s)"
            )
        return action

    return check


def make_action_check(space: spaces.Space, num_envs: int, env_id: str, out_of_bounds: str = "pass") -> ActionCheck:
    """Build the vectorised check for batched actions of ``space``.

    Args:
        space: The action space of one sub-environment.
        num_envs: Sub-environments per batch (the leading dimension of an action).
        env_id: Named in error messages.
        out_of_bounds: For ``Box`` spaces: ``"pass"``, ``"clip"`` or ``"raise"`` (see the module docstring).

    Returns:
        A function mapping a batched action to the array to step the env with.

    Raises:
        ValueError: ``out_of_bounds`` is not one of the choices.
    """
    if out_of_bounds not in OUT_OF_BOUNDS_CHOICES:
        raise ValueError(f"out_of_bounds_action must be one of {OUT_OF_BOUNDS_CHOICES}, got {out_of_bounds!r}")
    if isinstance(space, spaces.Discrete):
        return _discrete_check(space, num_envs, env_id)
    if isinstance(space, spaces.Box):
        return _box_check(space, num_envs, env_id, out_of_bounds)
    if isinstance(space, spaces.MultiDiscrete):
        return _multi_discrete_check(space, num_envs, env_id)
    if isinstance(space, spaces.MultiBinary):
        return _multi_binary_check(space, num_envs, env_id)
    return _generic_check(space, num_envs, env_id)
