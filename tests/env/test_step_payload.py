"""Tests of rlightning/env/step_payload.py: Ray env workers get only the part of a response they read."""

import numpy as np

from rlightning.env.gym_env import GymnasiumEnv
from rlightning.env.step_payload import step_payloads
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.env.worker_slot import build_slots
from rlightning.types import PolicyResponse
from rlightning.utils.config import EnvConfig


def _resp(env_id):
    return PolicyResponse(
        env_id, action=np.arange(3), log_prob=np.zeros(3), value=np.ones(3), ts_policy_sent_ns=5, weight_version=2
    )


def test_a_gymnasium_worker_with_the_default_preprocess_gets_the_action_alone():
    slots = build_slots([EnvConfig(name="CartPole-v1", num_envs=3)] * 2, default_env_preprocess_fn)
    assert all(s.env_cls is GymnasiumEnv for s in slots)
    resps = [_resp(s.env_id) for s in slots]
    out = step_payloads(slots, resps)
    for slot, full, sent in zip(slots, resps, out):
        assert vars(sent).keys() == {"env_id", "action"} and sent.env_id == slot.env_id
        assert sent.action is full.action  # no copy of the array
        np.testing.assert_array_equal(default_env_preprocess_fn(sent), default_env_preprocess_fn(full))
        assert vars(full).keys() >= {"log_prob", "value", "weight_version"}  # the driver's response is untouched


def test_a_custom_preprocess_or_a_non_response_is_sent_whole():
    def double(resp):
        return resp.action * 2 + (resp.value > 0)

    slots = build_slots([EnvConfig(name="CartPole-v1", num_envs=3)] * 3, [default_env_preprocess_fn, double, None])
    resps = [_resp(s.env_id) for s in slots]
    resps[2] = {"not": "a response"}  # an ObjectRef or a caller's bug: left for the worker to take or reject
    out = step_payloads(slots, resps)
    assert vars(out[0]).keys() == {"env_id", "action"}
    assert out[1] is resps[1] and out[2] is resps[2]
