"""Tests of rlightning/env/multi_agent_env.py: the built-in multi-agent env."""

import numpy as np
import pytest
from gymnasium import spaces

from rlightning.env import RendezvousEnv
from rlightning.env.utils.episodes import done_mask
from rlightning.types import MultiAgentEnvRet, MultiAgentPolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.registry import ENVS


def _env(num_envs=3, **kwargs):
    return RendezvousEnv(EnvConfig(name="rendezvous", num_envs=num_envs, **kwargs))


def _act(env, **actions):
    return MultiAgentPolicyResponse(env.env_id, action={a: np.asarray(v) for a, v in actions.items()})


def test_registered_and_shaped_per_agent():
    assert ENVS.get("rendezvous") is RendezvousEnv
    env = _env(num_envs=3, env_kwargs={"num_agents": 3})
    ret = env.reset(seed=0)
    assert isinstance(ret, MultiAgentEnvRet) and ret.agent_ids == ("agent_0", "agent_1", "agent_2")
    assert ret.observation["agent_1"].shape == (3, 3) and ret.observation["agent_1"].dtype == np.float32
    assert ret.last_reward["agent_0"].dtype == np.float32 and ret.last_terminated["agent_2"].shape == (3,)
    meta = env.get_metadata()
    assert meta.num_envs == 3 and isinstance(meta.action_space, spaces.Dict)
    assert meta.action_space["agent_0"] == spaces.Discrete(3)
    # Agents start apart: nobody has met yet.
    assert not done_mask(ret.last_terminated, ret.last_truncated).any()


def test_agents_meet_terminate_and_autoreset():
    env = _env(num_envs=1, env_kwargs={"size": 2})
    ret = env.reset(seed=1)
    left = int(np.argmin([ret.observation["agent_0"][0, 0], ret.observation["agent_1"][0, 0]]))
    # The agent on cell 0 moves right, the other stays: they meet.
    moves = {"agent_0": [2 if left == 0 else 1], "agent_1": [2 if left == 1 else 1]}
    ret = env.step(_act(env, **moves))
    assert ret.last_terminated["agent_0"].tolist() == [True]
    assert done_mask(ret.last_terminated, ret.last_truncated).tolist() == [True]
    assert ret.last_reward["agent_1"].tolist() == [1.0]
    assert ret.info["episode_return"].tolist() == [2.0] and ret.info["episode_length"].tolist() == [1]
    ret = env.step(_act(env, agent_0=[0], agent_1=[0]))
    assert ret.last_reward["agent_0"].tolist() == [0.0]
    assert done_mask(ret.last_terminated, ret.last_truncated).tolist() == [False]
    assert ret.info["episode_length"].tolist() == [0]
    assert env.episodes.episodes == 1


def test_truncation_after_max_episode_steps():
    env = _env(num_envs=2, max_episode_steps=2, env_kwargs={"size": 50})
    env.reset(seed=0)
    stay = _act(env, agent_0=[1, 1], agent_1=[1, 1])
    r1 = env.step(stay)
    r2 = env.step(stay)
    assert not r1.last_truncated["agent_0"].any()
    assert r2.last_truncated["agent_0"].tolist() == [True, True]
    assert r2.info["episode_return"].tolist() == pytest.approx([-0.2, -0.2])


def test_seeded_resets_are_reproducible():
    a = _env().reset(seed=5).observation["agent_0"]
    b = _env().reset(seed=5).observation["agent_0"]
    np.testing.assert_array_equal(a, b)


def test_action_errors_name_env_agent_value_and_space():
    env = _env(num_envs=2)
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"no action for agent\(s\) \['agent_1'\]"):
        env.step(_act(env, agent_0=[1, 1]))
    with pytest.raises(
        ValueError,
        match=r"env rendezvous-0 agent agent_1: action 3 \(sub-env 0\) is outside the action "
        r"space Discrete\(3\)",
    ):
        env.step(_act(env, agent_0=[1, 1], agent_1=[3, 1]))
    with pytest.raises(ValueError, match=r"takes a dict of agent id -> actions"):
        env.step(MultiAgentPolicyResponse(env.env_id, action=np.ones(2)))


def test_env_kwargs_errors():
    with pytest.raises(
        ValueError, match=r"unknown env_kwargs key 'agents' for rendezvous; valid keys: num_agents, size"
    ):
        _env(env_kwargs={"agents": 2})
    with pytest.raises(ValueError, match=r"env_kwargs\['size'\] must be an int >= 2, got 1"):
        _env(env_kwargs={"size": 1})
