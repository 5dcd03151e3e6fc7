import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.types import (
    EnvMeta,
    EnvRet,
    PolicyResponse,
    RecordKeyError,
    record_env_id,
    step_to_record,
    validate_record,
)

BOX = gym.spaces.Box(-1, 1, (4,), np.float32)


def _meta(num_envs=None, obs_space=BOX, act_space=gym.spaces.Discrete(3)):
    return EnvMeta("e", act_space, obs_space, num_envs)


def _record(n=2, t=None):
    batch = [n] if t is None else [n, t]
    td = TensorDict(
        {
            "obs": torch.zeros(*batch, 4),
            "action": torch.zeros(*batch, dtype=torch.int64),
            "next": {
                "obs": torch.ones(*batch, 4),
                "reward": torch.zeros(*batch),
                "terminated": torch.zeros(*batch, dtype=torch.bool),
                "truncated": torch.zeros(*batch, dtype=torch.bool),
                "done": torch.zeros(*batch, dtype=torch.bool),
            },
            "valid": torch.ones(*batch, dtype=torch.bool),
        },
        batch_size=batch,
    )
    td.set_non_tensor("env_id", "e")
    return td


def test_vectorised_step_to_record_layout():
    meta = _meta(num_envs=2)
    r0 = EnvRet("e", np.zeros((2, 4), np.float32), np.zeros(2), np.array([False, True]), np.zeros(2, bool))
    r1 = EnvRet("e", np.ones((2, 4), np.float32), np.array([1.0, 0.0]), np.array([True, False]), np.zeros(2, bool))
    resp = PolicyResponse("e", action=np.array([1, 2]), log_prob=np.zeros(2, np.float32), weight_version=3)
    td = step_to_record(r0, resp, r1, env_meta=meta, episode_id=[5, 7])
    assert td.batch_size == torch.Size([2]) and record_env_id(td) == "e"
    assert td["next", "reward"].dtype == torch.float32 and td["next", "reward"].tolist() == [1.0, 0.0]
    assert td["next", "done"].tolist() == [True, False]
    assert td["valid"].tolist() == [True, False]  # row 1 was done at r0: its action was ignored
    assert td["episode_id"].tolist() == [5, 7]
    assert "weight_version" not in td.keys()
    assert (td["next", "obs"] == 1).all() and (td["obs"] == 0).all()
    validate_record(td, num_envs=2, observation_space=BOX, require_env_id=True)


def test_single_unbatched_env_gives_one_row():
    for num_envs in (None, 1):
        meta = _meta(num_envs=num_envs)
        r0 = EnvRet("e", np.zeros(4, np.float32))
        r1 = EnvRet("e", np.ones(4, np.float32), 2.5, True, False)
        td = step_to_record(r0, PolicyResponse("e", action=2), r1, env_meta=meta)
        assert td.batch_size == torch.Size([1])
        assert td["action"].tolist() == [2] and td["obs"].shape == (1, 4)
        assert td["next", "terminated"].tolist() == [True]
    # no metadata: a 0-d observation is one env too
    td = step_to_record(EnvRet("e", 3), PolicyResponse("e", action=np.float32(0.5)), EnvRet("e", 4, 1.0))
    assert td.batch_size == torch.Size([1]) and td["obs"].tolist() == [3]


def test_dict_observations_are_nested_keys():
    space = gym.spaces.Dict({"pos": BOX, "img": gym.spaces.Box(0, 255, (2, 2), np.uint8)})
    meta = _meta(num_envs=2, obs_space=space)
    obs = {"pos": np.zeros((2, 4), np.float32), "img": np.zeros((2, 2, 2), np.uint8)}
    td = step_to_record(
        EnvRet("e", obs), PolicyResponse("e", action=np.zeros(2, np.int64)), EnvRet("e", obs), env_meta=meta
    )
    assert td["obs", "img"].dtype == torch.uint8 and td["next", "obs", "pos"].shape == (2, 4)
    validate_record(td, observation_space=space)


@pytest.mark.parametrize(
    "env_ret, match",
    [
        ("text", r"env_ret must be an EnvRet, got str"),
        (None, r"env_ret must be an EnvRet, got NoneType"),
        (EnvRet("e", None), r"env_ret.observation must be an array or a number, got NoneType"),
        (EnvRet("e", np.array([object()] * 4)), r"env_ret.observation must hold real numbers.*dtype object"),
        (EnvRet("e", {"a": np.zeros(4, np.float32)}), r"observation is a dict.*needs a Dict space"),
        (EnvRet("e", np.zeros(4, np.float32), last_reward="x"), r"env_ret.last_reward must be an array or a number"),
    ],
)
def test_converter_rejects_wrong_kinds_with_type_errors(env_ret, match):
    with pytest.raises(TypeError, match=match):
        step_to_record(env_ret, PolicyResponse("e", action=0), EnvRet("e", np.zeros(4, np.float32)), env_meta=_meta())


def test_converter_value_errors():
    meta = _meta(num_envs=2)
    good = EnvRet("e", np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=r"observation has shape \(3, 4\), expected a leading dimension of num_envs=2"):
        step_to_record(
            EnvRet("e", np.zeros((3, 4), np.float32)), PolicyResponse("e", action=[0, 0]), good, env_meta=meta
        )
    with pytest.raises(
        ValueError, match=r"policy_resp.action has shape \(3,\), expected a leading dimension of num_envs=2"
    ):
        step_to_record(good, PolicyResponse("e", action=[0, 0, 1]), good, env_meta=meta)
    with pytest.raises(ValueError, match=r"PolicyResponse for env 'x' cannot be paired with the EnvRet of env 'e'"):
        step_to_record(good, PolicyResponse("x", action=[0, 0]), good, env_meta=meta)
    with pytest.raises(RecordKeyError, match=r"has no 'action'"):
        step_to_record(good, PolicyResponse("e", value=[0, 0]), good, env_meta=meta)
    with pytest.raises(TypeError, match=r"policy_resp must be a PolicyResponse, got dict"):
        step_to_record(good, {"action": 0}, good, env_meta=meta)
    flags = EnvRet("e", np.zeros((2, 4), np.float32), last_terminated=[0.5, 0.0])
    with pytest.raises(ValueError, match=r"last_terminated must be booleans"):
        step_to_record(good, PolicyResponse("e", action=[0, 0]), flags, env_meta=meta)
    with pytest.raises(ValueError, match=r"observation 'obs' has shape \(2, 4\) and dtype float64"):
        step_to_record(EnvRet("e", np.zeros((2, 4))), PolicyResponse("e", action=[0, 0]), good, env_meta=meta)


def test_validate_record_accepts_chunks_and_returns_spec():
    spec = validate_record(_record(3, 5), num_envs=3, observation_space=BOX)
    assert spec[("obs",)] == ((4,), torch.float32) and spec[("next", "reward")] == ((), torch.float32)
    validate_record(_record(3, 2), spec=spec)


def test_validate_record_errors_name_the_key():
    with pytest.raises(TypeError, match=r"record must be a tensordict.TensorDict .*got dict"):
        validate_record({"obs": 1})
    with pytest.raises(ValueError, match=r"batch dims \[N\] .* got batch_size \[2, 1, 1\]"):
        validate_record(_record(2).reshape(2, 1, 1))
    with pytest.raises(ValueError, match=r"has 2 rows .*expected num_envs=3"):
        validate_record(_record(2), num_envs=3)
    td = _record()
    del td["next", "reward"]
    with pytest.raises(RecordKeyError, match=r"record has no 'next.reward' key"):
        validate_record(td)
    with pytest.raises(ValueError, match=r"has no 'next.reward' key"):  # also a ValueError
        validate_record(td)
    td = _record()
    td["next", "reward"] = torch.zeros(2, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'next.reward' has dtype float64, expected float32"):
        validate_record(td)
    td = _record()
    td["next", "terminated"] = torch.zeros(2, 1, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"'next.terminated' has shape \(2, 1\), expected \(2,\)"):
        validate_record(td)
    td = _record()
    td["next", "done"] = torch.ones(2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"'next.done' must equal next.terminated \| next.truncated"):
        validate_record(td)
    td = _record()
    td["next", "obs"] = torch.zeros(2, 3)
    with pytest.raises(ValueError, match=r"'next.obs' has per-row shape \(3,\).*expected those of 'obs'"):
        validate_record(td)
    td = _record()
    td["obs"] = torch.zeros(2, 4, dtype=torch.float64)
    td["next", "obs"] = torch.zeros(2, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'obs' has per-row shape \(4,\) and dtype float64, expected .*float32"):
        validate_record(td, observation_space=BOX)
    spec = validate_record(_record())
    td = _record()
    td["extra"] = torch.zeros(2)
    with pytest.raises(ValueError, match=r"keys differ from the stored ones: missing \[\], unexpected \['extra'\]"):
        validate_record(td, spec=spec)
    with pytest.raises(TypeError, match=r"needs the env worker's id"):
        validate_record(_record().exclude("env_id"), require_env_id=True)
    td = _record()
    td.set_non_tensor("action", "left")
    with pytest.raises(RecordKeyError, match=r"has no 'action' key"):
        validate_record(td)
