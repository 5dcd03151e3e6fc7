"""Multi-agent records (agents.<id>.*): through Storage.add_rollout and sample, masks, per-agent GAE, bad input."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensordict import TensorDict

from rlightning.buffer.utils.storage import Storage
from rlightning.policy.multi_agent import MultiAgentGAE
from rlightning.policy.returns import gae
from rlightning.types import EnvMeta
from rlightning.types.multi_agent_record import agent_group_batch, record_agent_ids
from rlightning.types.record import validate_record

AGENTS = ("a0", "a1")
OBS = spaces.Dict({a: spaces.Box(-1.0, 1.0, (3,), dtype=np.float32) for a in AGENTS})
ACT = spaces.Dict({a: spaces.Discrete(2) for a in AGENTS})
META = EnvMeta("ma-0", ACT, OBS, 2)


def record(t=4, agents=AGENTS, obs_dim=3, a1_dies_at=1, env_id="ma-0", drop=None):
    """A [2, t] record: episodes end at the last step (all agents done); a1 terminates at ``a1_dies_at``."""
    n = 2
    steps = torch.arange(t)
    root, nxt = {}, {}
    for a in agents:
        term = torch.zeros(n, t, dtype=torch.bool)
        term[:, -1] = True
        alive = torch.ones(n, t, dtype=torch.bool)
        if a == "a1":
            term[:, a1_dies_at:] = True
            alive[:, a1_dies_at + 1 :] = False
        root[a] = {
            "obs": torch.rand(n, t, obs_dim),
            "action": torch.zeros(n, t, dtype=torch.int64),
            "log_prob": torch.zeros(n, t),
            "value": torch.full((n, t), 0.5),
            "valid": alive,
        }
        nxt[a] = {
            "obs": torch.rand(n, t, obs_dim),
            "reward": torch.where(alive, 1.0, 0.0).float() + 0 * steps,
            "terminated": term,
            "truncated": torch.zeros(n, t, dtype=torch.bool),
            "done": term.clone(),
        }
        if drop and drop[0] == a:
            (root if drop[1] == "root" else nxt)[a].pop(drop[2])
    done = torch.zeros(n, t, dtype=torch.bool)
    done[:, -1] = True
    td = TensorDict(
        {
            "agents": root,
            "valid": torch.ones(n, t, dtype=torch.bool),
            "episode_id": torch.arange(n).repeat_interleave(t).reshape(n, t),
            "next": {
                "agents": nxt,
                "reward": torch.ones(n, t) * len(agents),
                "terminated": done,
                "truncated": torch.zeros(n, t, dtype=torch.bool),
                "done": done.clone(),
            },
        },
        batch_size=[n, t],
    )
    td.set_non_tensor("env_id", env_id)
    return td


def storage():
    return Storage(256, env_meta_list=[META], postprocess_fn=MultiAgentGAE(0.9, 0.8), sampler="all")


def test_nested_records_go_through_add_rollout_and_sample():
    st = storage()
    td = record()
    assert record_agent_ids(td) == ["a0", "a1"]
    spec = validate_record(td, observation_space=OBS)
    assert ("agents", "a1", "valid") in spec and ("next", "agents", "a0", "reward") in spec
    assert st.add_rollout(td) == 8
    data = st.sample(8)
    assert {"agents.a0.obs", "agents.a1.valid", "agents.a0.advantage", "next_agents.a1.reward"} <= set(data.keys())
    # the masks survive storage: a1 is valid on steps 0 and 1 of each episode only
    assert int(data["agents.a1.valid"].sum()) == 4 and int(data["agents.a0.valid"].sum()) == 8
    batch = agent_group_batch(data, ["a0", "a1"])
    assert batch.batch_size == (12,)  # 8 valid steps of a0 + 4 of a1: nothing of a1 after it finished
    assert set(batch.keys()) >= {"obs", "action", "log_prob", "value", "advantage", "return"}
    assert batch["valid"].all()


def test_per_agent_gae_matches_single_agent_gae_and_stops_at_an_agents_end():
    st = storage()
    st.add_rollout(record(t=4, a1_dies_at=1))
    data = st.sample(8)
    for a, length in (("a0", 4), ("a1", 2)):
        reward = torch.ones(length)
        value = torch.full((length,), 0.5)
        next_value = torch.cat([value[1:], torch.zeros(1)])
        ends = torch.zeros(length, dtype=torch.bool)
        ends[-1] = True
        want, _ = gae(reward, value, next_value, ends, ends, gamma=0.9, lmbda=0.8)
        got = data[f"agents.{a}.advantage"][data[f"agents.{a}.valid"]]
        assert torch.allclose(torch.sort(got).values, torch.sort(want.float().repeat(2)).values, atol=1e-5), a
        ret = data[f"agents.{a}.return"][data[f"agents.{a}.valid"]]
        assert torch.allclose(torch.sort(ret).values, torch.sort((want.float() + 0.5).repeat(2)).values, atol=1e-5)


@pytest.mark.parametrize(
    "bad, match",
    [
        (lambda: record(agents=("a0", "a2")), r"agents \['a0', 'a2'\], but the env's agents are \['a0', 'a1'\]"),
        (lambda: record(obs_dim=4), r"agents.a0.obs' has per-row shape \(4,\).*expected \(3,\)"),
        (lambda: record(drop=("a1", "root", "valid")), r"agent 'a1' has no 'agents.a1.valid' key"),
        (lambda: record(drop=("a0", "next", "reward")), r"agent 'a0' has no 'next.agents.a0.reward' key"),
    ],
)
def test_bad_records_get_clear_errors_and_store_nothing(bad, match):
    st = storage()
    st.add_rollout(record())
    size = st.size
    with pytest.raises(ValueError, match=match):
        st.add_rollout(bad())
    assert st.size == size
    st.add_rollout(record())  # the storage goes on as before
    assert st.size == 2 * size


def test_wrong_agent_flag_dtypes_and_inconsistent_done_are_rejected():
    td = record()
    td["agents", "a0", "valid"] = td["agents", "a0", "valid"].float()
    with pytest.raises(ValueError, match=r"'agents.a0.valid' has per-row shape \(\) and dtype float32, expected"):
        validate_record(td, observation_space=OBS)
    td = record()
    td["next", "agents", "a1", "done"] = torch.zeros(2, 4, dtype=torch.bool)
    with pytest.raises(ValueError, match="next.agents.a1.done' must equal its terminated"):
        validate_record(td)
    td = record()
    del td["next", "agents", "a1"]
    with pytest.raises(ValueError, match=r"agents \['a0', 'a1'\] under 'agents' but \['a0'\] under 'next.agents'"):
        validate_record(td)
    with pytest.raises(KeyError, match=r"agent\(s\) \['a7'\]"):
        agent_group_batch(TensorDict({"agents.a0.valid": torch.ones(3, dtype=torch.bool)}, [3]), ["a7"])


def test_multi_agent_env_rets_one_at_a_time_are_refused_with_the_way_to_store_them():
    from rlightning.types import MultiAgentEnvRet, MultiAgentPolicyResponse

    st = storage()
    obs = {a: np.zeros((2, 3), np.float32) for a in AGENTS}
    flags = {a: np.zeros(2, bool) for a in AGENTS}
    ret = MultiAgentEnvRet("ma-0", obs, {a: np.zeros(2, np.float32) for a in AGENTS}, flags, flags)
    resp = MultiAgentPolicyResponse("ma-0", action={a: np.zeros(2, np.int64) for a in AGENTS})
    with pytest.raises(TypeError, match="a dict observation needs add_rollout records"):
        st.add_transition(ret, resp)
    assert st.size == 0
    from rlightning.types import step_to_record

    with pytest.raises(TypeError, match="multi-agent steps are stored as whole rollout records nested per agent"):
        step_to_record(ret, resp, ret)


def test_replay_transitions_of_a_group_are_its_agents_valid_steps_under_single_agent_names():
    st = Storage(256, env_meta_list=[META], postprocess_fn=None, sampler="all")
    td = record(t=4, a1_dies_at=1)
    st.add_rollout(td)
    data = st.sample(8)
    data["_index"] = torch.arange(8) + 100  # what a prioritized draw adds per row
    batch = agent_group_batch(data, ["a0", "a1"], transitions=True)
    assert batch.batch_size == (12,)
    assert {"obs", "action", "next_obs", "reward", "terminated", "truncated", "done", "_index", "_row"} <= set(
        batch.keys()
    )
    # row r of agent a: the sampled row's own next observation, reward and flags
    a1_rows = data["agents.a1.valid"].nonzero().reshape(-1)
    torch.testing.assert_close(batch["next_obs"][8:], data["next_agents.a1.obs"][a1_rows])
    torch.testing.assert_close(batch["obs"][:8], data["agents.a0.obs"])
    assert batch["terminated"][8:].tolist() == data["next_agents.a1.terminated"][a1_rows].tolist()
    assert batch["_row"].tolist() == list(range(8)) + a1_rows.tolist()
    assert batch["_index"].tolist() == [100 + r for r in batch["_row"].tolist()]
    plain = agent_group_batch(data, ["a0", "a1"])  # on-policy learners: no next leaves, no per-row keys
    assert "next_obs" not in plain.keys() and "_index" not in plain.keys()
