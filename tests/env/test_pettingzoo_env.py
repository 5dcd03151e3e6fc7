"""The PettingZoo backend: vectorised parallel envs, agents that finish early, per-agent records and bad input."""

import builtins

import numpy as np
import pytest

from rlightning.env import PettingZooEnv, RolloutWorker
from rlightning.env.suites import MissingSuiteError
from rlightning.policy.multi_agent import MultiAgentPolicy
from rlightning.types import MultiAgentPolicyResponse
from rlightning.utils.config import EnvConfig, PolicyConfig

SPREAD = EnvConfig(name="mpe2:simple_spread_v3", backend="pettingzoo", num_envs=2, env_kwargs={"N": 2, "max_cycles": 5})
EARLY = EnvConfig(name="tests.support.pz_envs:early_exit", backend="pettingzoo", num_envs=2)


def test_simple_spread_is_vectorised_per_agent():
    env = PettingZooEnv(SPREAD)
    meta = env.get_metadata()
    assert list(meta.action_space.spaces) == ["agent_0", "agent_1"]
    ret = env.reset(seed=0)
    assert {a: o.shape for a, o in ret.observation.items()} == {"agent_0": (2, 12), "agent_1": (2, 12)}
    assert ret.info["active"]["agent_0"].all()
    for _ in range(5):
        ret = env.step(MultiAgentPolicyResponse(env.env_id, action={a: np.zeros(2, np.int64) for a in env.agent_ids}))
        assert ret.last_reward["agent_0"].dtype == np.float32
    # max_cycles=5: every agent truncated on the 5th step, with its own return and the team's summed
    assert ret.last_truncated["agent_0"].all() and not ret.last_terminated["agent_0"].any()
    team = ret.info["agent_episode_return"]["agent_0"] + ret.info["agent_episode_return"]["agent_1"]
    np.testing.assert_allclose(ret.info["episode_return"], team, rtol=1e-5)
    assert not ret.info["active"]["agent_1"].any()  # the row is done: nobody acts on the final observation
    ret = env.step(MultiAgentPolicyResponse(env.env_id, action={a: np.zeros(2, np.int64) for a in env.agent_ids}))
    assert not ret.last_truncated["agent_0"].any() and ret.info["episode_length"].tolist() == [0, 0]  # autoreset
    env.close()


def test_agents_that_finish_early_stay_done_and_inactive():
    env = PettingZooEnv(EARLY)
    env.reset(seed=0)
    act = MultiAgentPolicyResponse(
        env.env_id, action={"stayer": np.zeros(2, np.int64), "quitter": np.ones(2, np.int64)}
    )
    seen = [env.step(act) for _ in range(4)]
    assert [bool(r.last_terminated["quitter"][0]) for r in seen] == [False, True, True, True]
    assert [bool(r.info["active"]["quitter"][0]) for r in seen] == [True, False, False, False]
    assert [float(r.last_reward["quitter"][0]) for r in seen] == [1.0, 1.0, 0.0, 0.0]
    assert [bool(r.last_terminated["stayer"][0]) for r in seen] == [False, False, False, True]
    assert seen[-1].info["agent_episode_return"]["quitter"].tolist() == [2.0, 2.0]
    assert seen[-1].info["episode_return"].tolist() == [6.0, 6.0]


def test_bad_actions_and_names_are_rejected_with_the_agents_named():
    env = PettingZooEnv(SPREAD)
    env.reset(seed=0)
    zeros = np.zeros(2, np.int64)
    with pytest.raises(ValueError, match=r"no action for agent\(s\) \['agent_1'\]"):
        env.step(MultiAgentPolicyResponse(env.env_id, action={"agent_0": zeros}))
    with pytest.raises(ValueError, match=r"unknown agent\(s\) \['agent_9'\]"):
        env.step(MultiAgentPolicyResponse(env.env_id, action={"agent_0": zeros, "agent_1": zeros, "agent_9": zeros}))
    with pytest.raises(ValueError, match="agent_1"):
        env.step(MultiAgentPolicyResponse(env.env_id, action={"agent_0": zeros, "agent_1": np.array([0, 7])}))
    with pytest.raises(ValueError, match="'package:env_module'"):
        PettingZooEnv(EnvConfig(name="simple_spread_v3", backend="pettingzoo"))
    with pytest.raises(ValueError, match="no env module or callable 'nope_v0'"):
        PettingZooEnv(EnvConfig(name="mpe2:nope_v0", backend="pettingzoo"))


def test_a_missing_package_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_mpe2(name, *args, **kwargs):
        if name == "mpe2" or name.startswith("mpe2."):
            raise ModuleNotFoundError(f"No module named {name!r}", name="mpe2")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mpe2)
    for mod in [m for m in list(__import__("sys").modules) if m == "mpe2" or m.startswith("mpe2.")]:
        monkeypatch.delitem(__import__("sys").modules, mod)
    with pytest.raises(MissingSuiteError, match=r'pip install "rlightning\[pettingzoo\]"'):
        PettingZooEnv.prepare(SPREAD)


def test_collect_writes_per_agent_records_with_masks():
    w = RolloutWorker(PettingZooEnv, EARLY)
    meta = w.get_metadata()
    w.attach_policy(MultiAgentPolicy, PolicyConfig(type="ppo"), meta, seed=0)
    w.reset(seed=0)
    result = w.collect(10)
    td = result.record
    assert td.batch_size == (2, 10)
    # episodes of 4 steps, then the autoreset step: steps 0-3 valid, 4 not, 5-8 valid, 9 not
    assert td["valid"][0].tolist() == [True] * 4 + [False] + [True] * 4 + [False]
    assert td["agents", "quitter", "valid"][0].tolist() == [True, True, False, False, False] * 2
    assert td["agents", "stayer", "valid"][0].tolist() == td["valid"][0].tolist()
    assert td["next", "done"][0].tolist() == [False, False, False, True, False] * 2
    assert td["next", "agents", "quitter", "done"][0, :4].tolist() == [False, True, True, True]
    assert td["next", "reward"][0, :4].tolist() == [2.0, 2.0, 1.0, 1.0]
    assert result.episode_returns == [6.0] * 4
    assert result.agent_episode_returns == {"stayer": [4.0] * 4, "quitter": [2.0] * 4}
    assert set(td["agents", "stayer"].keys()) >= {"obs", "action", "log_prob", "value", "valid"}
