"""Multi-agent off-policy learning: DQN, SAC and TD3 groups read each agent's replay transitions."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensordict import TensorDict

from rlightning.policy.multi_agent import MultiAgentPolicy
from rlightning.policy.multi_agent_nstep import MultiAgentNStep
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig, apply_overrides, load_preset
from rlightning.utils.validate import validate_config

AGENTS = ["agent_0", "agent_1", "agent_2"]
RENDEZVOUS = ["env.backend=gymnasium", "env.name=rendezvous", "env.env_kwargs={num_agents: 3}"]


def meta(continuous=False):
    act = spaces.Box(-1.0, 1.0, (2,), dtype=np.float32) if continuous else spaces.Discrete(3)
    return EnvMeta(
        "ma-0",
        spaces.Dict({a: act for a in AGENTS}),
        spaces.Dict({a: spaces.Box(0.0, 1.0, (3,), dtype=np.float32) for a in AGENTS}),
        4,
    )


def transitions(b=8, continuous=False, prioritized=False):
    """A sampled replay batch of multi-agent transitions; agent_0 had finished on the first 3 rows."""
    data = {}
    for a in AGENTS:
        valid = torch.ones(b, dtype=torch.bool)
        if a == "agent_0":
            valid[:3] = False
        action = torch.rand(b, 2) * 2 - 1 if continuous else torch.randint(0, 3, (b,))
        data.update(
            {
                f"agents.{a}.obs": torch.rand(b, 3),
                f"agents.{a}.action": action,
                f"agents.{a}.valid": valid,
                f"next_agents.{a}.obs": torch.rand(b, 3),
                f"next_agents.{a}.reward": torch.randn(b),
                f"next_agents.{a}.terminated": torch.zeros(b, dtype=torch.bool),
                f"next_agents.{a}.truncated": torch.zeros(b, dtype=torch.bool),
                f"next_agents.{a}.done": torch.zeros(b, dtype=torch.bool),
            }
        )
    if prioritized:
        data.update(
            {"_index": torch.arange(b) * 2, "_shard": torch.zeros(b, dtype=torch.long), "_weight": torch.ones(b)}
        )
    return TensorDict(data, batch_size=[b])


@pytest.mark.parametrize("algo", ["dqn", "sac", "td3"])
def test_off_policy_groups_train_on_their_agents_valid_transitions(algo):
    cfg = PolicyConfig(type=algo, hidden_sizes=[16, 16])
    p = MultiAgentPolicy(cfg)
    p.setup(meta(continuous=algo != "dqn"), seed=0)
    data = transitions(continuous=algo != "dqn")
    data["agents.agent_0.obs"][:3] = float("nan")  # garbage on the masked steps must reach no loss
    p.update_dataset(data)
    metrics = p.train()
    assert metrics and all(np.isfinite(v) for v in metrics.values()), metrics
    # acting copies get the acting modules only (DQN's target network, SAC's critics stay with the learner)
    inner_sync = type(p.policies["shared"]).sync_module_names
    assert sorted(p.sync_module_names) == sorted(f"shared.{m}" for m in inner_sync)
    assert set(p.state_dict()) == {k for k in p.state_dict() if k.split(".")[1] in inner_sync}


def test_prioritized_rows_get_the_largest_td_error_of_their_agents():
    p = MultiAgentPolicy(
        PolicyConfig(type="dqn", hidden_sizes=[16, 16], agent_groups={"a": ["agent_0"], "b": AGENTS[1:]})
    )
    p.setup(meta(), seed=0)
    p.update_dataset(transitions(prioritized=True))
    p.train()
    a, b = p.policies["a"], p.policies["b"]
    # what each group's learner reported, per agent-step (agent_0: rows 3-7; agents 1 and 2: rows 0-7 each)
    raw_a = {k: v.clone() for k, v in a.priority_updates.items()}
    raw_b = {k: v.clone() for k, v in b.priority_updates.items()}
    out = p.priority_update()
    expected = {}
    for raw in (raw_a, raw_b):
        for idx, prio in zip(raw["index"].tolist(), raw["priority"].tolist()):
            expected[idx] = max(expected.get(idx, -1.0), prio)
    assert sorted(out["index"].tolist()) == sorted(expected) == [2 * r for r in range(8)]
    got = dict(zip(out["index"].tolist(), out["priority"].tolist()))
    assert got == pytest.approx(expected)
    assert out["shard"].tolist() == [0] * 8
    assert p.priority_update() is None  # handed over once


def test_a_multi_agent_config_is_checked_for_a_per_agent_learning_rule():
    for preset in ("cartpole_dqn", "cartpole_rainbow", "pendulum_sac", "pendulum_td3"):
        validate_config(apply_overrides(load_preset(preset), RENDEZVOUS + ["cluster.inference=env_workers"]))
    cfg = apply_overrides(load_preset("cartpole_rainbow"), RENDEZVOUS + ["cluster.inference=env_workers"])
    assert isinstance(MultiAgentPolicy.buffer_postprocess_fn(cfg.policy), MultiAgentNStep)


def test_n_step_returns_per_agent_stop_at_the_agents_own_end():
    # two env episodes (lengths 4 and 3); agent a1 terminates at step 1 of the first and truncates at step 0
    # of the second (its later steps are invalid)
    gamma, n = 0.5, 3
    reward = {"a0": torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]), "a1": torch.tensor([10.0, 20, 0, 0, 30, 0, 0])}
    term = {"a0": torch.tensor([0, 0, 0, 1, 0, 0, 1]).bool(), "a1": torch.tensor([0, 1, 0, 0, 0, 0, 0]).bool()}
    trunc = {"a0": torch.zeros(7, dtype=torch.bool), "a1": torch.tensor([0, 0, 0, 0, 1, 0, 0]).bool()}
    data = {}
    for a in ("a0", "a1"):
        data.update(
            {
                f"agents.{a}.valid": torch.ones(7, dtype=torch.bool),
                f"next_agents.{a}.reward": reward[a],
                f"next_agents.{a}.obs": torch.arange(7.0).reshape(7, 1) + (100 if a == "a1" else 0),
                f"next_agents.{a}.terminated": term[a],
                f"next_agents.{a}.truncated": trunc[a],
            }
        )
    out = MultiAgentNStep(n, gamma).batched(TensorDict(data, batch_size=[7]), torch.tensor([4, 3]))
    # a0: plain n-step inside each env episode
    assert out["agents.a0.nstep_reward"].tolist() == pytest.approx([2.75, 4.5, 5.0, 4.0, 9.75, 9.5, 7.0])
    assert out["agents.a0.nstep_discount"].tolist() == pytest.approx([0.125, 0, 0, 0, 0, 0, 0])
    assert out["agents.a0.nstep_next_obs"].reshape(-1).tolist() == [2, 3, 3, 3, 6, 6, 6]
    # a1: its own episode is steps 0-1 (terminated), then its invalid rest of the env episode (2-3);
    # in the second env episode it truncates at step 4: bootstraps from its own next obs with gamma^1
    assert out["agents.a1.nstep_reward"][[0, 1, 4]].tolist() == pytest.approx([20.0, 20.0, 30.0])
    assert out["agents.a1.nstep_discount"][[0, 1, 4]].tolist() == pytest.approx([0.0, 0.0, 0.5])
    assert out["agents.a1.nstep_next_obs"].reshape(-1)[[0, 1, 4]].tolist() == [101, 101, 104]
    with pytest.raises(KeyError, match=r"agent 'a1' lacks \['next_agents.a1.obs'\]"):
        MultiAgentNStep(n, gamma).batched(TensorDict(data, batch_size=[7]).exclude("next_agents.a1.obs"), [4, 3])
