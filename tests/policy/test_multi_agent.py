"""MultiAgentPolicy: agents mapped to policies by policy.agent_groups, acting per agent, learning from masks."""

import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensordict import TensorDict

from rlightning.policy.multi_agent import MultiAgentPolicy, resolve_agent_groups
from rlightning.types import EnvMeta
from rlightning.utils.config import ConfigError, PolicyConfig, apply_overrides, load_preset
from rlightning.utils.validate import validate_config

AGENTS = ["agent_0", "agent_1", "agent_2"]
META = EnvMeta(
    "ma-0",
    spaces.Dict({a: spaces.Discrete(3) for a in AGENTS}),
    spaces.Dict({a: spaces.Box(0.0, 1.0, (3,), dtype=np.float32) for a in AGENTS}),
    4,
)


def policy(groups=None):
    p = MultiAgentPolicy(PolicyConfig(type="ppo", agent_groups=groups, num_minibatches=2, update_epochs=1))
    p.setup(META, seed=0)
    return p


def test_shared_parameters_act_for_every_agent():
    p = policy()
    assert p.groups == {"shared": AGENTS}
    assert sorted(p.modules) == ["shared.actor", "shared.critic", "shared.encoder"]
    obs = {a: np.full((4, 3), i / 3, dtype=np.float32) for i, a in enumerate(AGENTS)}
    out = p.compute_actions(obs, deterministic=True)
    assert set(out) >= {"action", "log_prob", "value"} and set(out["action"]) == set(AGENTS)
    assert out["action"]["agent_1"].shape == (4,)
    # one network: the same observation gives the same value whichever agent sees it
    same = p.compute_actions({a: obs["agent_0"] for a in AGENTS}, deterministic=True)
    np.testing.assert_array_equal(same["value"]["agent_0"], same["value"]["agent_2"])


def test_one_policy_per_group_has_its_own_parameters_and_metrics():
    p = policy({"left": ["agent_0"], "rest": ["agent_1", "agent_2"]})
    assert p.groups == {"left": ["agent_0"], "rest": ["agent_1", "agent_2"]}
    assert {"left.actor", "rest.actor"} <= set(p.modules)
    assert p.modules["left.actor"] is not p.modules["rest.actor"]
    same = np.random.default_rng(0).random((4, 3), dtype=np.float32)
    out = p.compute_actions({a: same for a in AGENTS}, deterministic=True)
    assert out["value"]["agent_1"].tolist() == out["value"]["agent_2"].tolist()
    assert out["value"]["agent_0"].tolist() != out["value"]["agent_1"].tolist()
    data = sampled(b=8)
    p.update_dataset(data)
    metrics = p.train()
    assert {"left/policy_loss", "rest/policy_loss"} <= set(metrics)
    assert p.policies["left"].dataset["obs"].shape[0] == 8 - 3  # agent_0's valid steps only


def sampled(b=8):
    data = {}
    for a in AGENTS:
        valid = torch.ones(b, dtype=torch.bool)
        if a == "agent_0":
            valid[:3] = False  # finished early: those steps must reach no loss
        data.update(
            {
                f"agents.{a}.obs": torch.rand(b, 3),
                f"agents.{a}.action": torch.randint(0, 3, (b,)),
                f"agents.{a}.log_prob": torch.full((b,), -1.1),
                f"agents.{a}.value": torch.zeros(b),
                f"agents.{a}.advantage": torch.randn(b),
                f"agents.{a}.return": torch.randn(b),
                f"agents.{a}.valid": valid,
            }
        )
    return TensorDict(data, batch_size=[b])


def test_invalid_steps_never_reach_the_loss():
    p = policy()
    data = sampled()
    data["agents.agent_0.obs"][:3] = float("nan")  # garbage on the masked steps
    p.update_dataset(data)
    assert p.policies["shared"].dataset["obs"].shape[0] == 3 * 8 - 3
    metrics = p.train()
    assert np.isfinite(metrics["policy_loss"]) and np.isfinite(metrics["value_loss"])


@pytest.mark.parametrize(
    "groups, match",
    [
        ({"a": ["agent_0", "agent_9"], "b": ["agent_1", "agent_2"]}, r"names agent 'agent_9', which the env does not"),
        ({"a": ["agent_0", "agent_1"], "b": ["agent_1", "agent_2"]}, r"agent 'agent_1' is in policy.agent_groups 'a'"),
        ({"a": ["agent_0"]}, r"agent\(s\) \['agent_1', 'agent_2'\] are in no policy.agent_groups group"),
        ({"a": []}, r"policy.agent_groups\['a'\] must be a non-empty list"),
    ],
)
def test_bad_group_maps_are_rejected(groups, match):
    with pytest.raises(ValueError, match=match):
        resolve_agent_groups(groups, AGENTS)


def test_groups_sharing_parameters_need_the_same_spaces_and_dict_spaces():
    meta = EnvMeta(
        "ma-0",
        spaces.Dict({"a": spaces.Discrete(2), "b": spaces.Discrete(5)}),
        spaces.Dict({"a": spaces.Box(0, 1, (3,)), "b": spaces.Box(0, 1, (3,))}),
        2,
    )
    with pytest.raises(ValueError, match="group 'shared' shares parameters between agents 'a' and 'b'"):
        MultiAgentPolicy(PolicyConfig(type="ppo")).setup(meta)
    with pytest.raises(ValueError, match="needs Dict action and observation spaces keyed by agent id"):
        MultiAgentPolicy(PolicyConfig(type="ppo")).setup(EnvMeta("x", spaces.Discrete(2), spaces.Box(0, 1, (3,)), 1))
    p = policy()
    with pytest.raises(ValueError, match=r"observations for agents \['agent_0'\]; the policy acts for"):
        p.compute_actions({"agent_0": np.zeros((4, 3), np.float32)})
    with pytest.raises(KeyError, match=r"no agent\(s\) \['agent_2'\]"):
        p.update_dataset(sampled().exclude("agents.agent_2.valid"))


def test_the_config_is_checked_before_any_worker():
    rdv = ["env.backend=gymnasium", "env.name=rendezvous", "env.env_kwargs={num_agents: 3}"]
    cfg = apply_overrides(load_preset("mpe_ppo"), rdv + ["policy.agent_groups={a: [agent_0, agent_7]}"])
    with pytest.raises(ConfigError, match="names agent 'agent_7'"):
        validate_config(cfg)
    cfg = apply_overrides(load_preset("mpe_ppo"), rdv + ["cluster.inference=eval_workers"])
    with pytest.raises(ConfigError, match="trains with cluster.inference='env_workers'"):
        validate_config(cfg)
    cfg = apply_overrides(
        load_preset("mpe_ppo"),
        rdv + ["policy.type=appo", "engine=asyncrl"],
    )
    with pytest.raises(ConfigError, match="has no per-agent version"):
        validate_config(cfg)
    cfg = apply_overrides(load_preset("cartpole_ppo"), ["policy.agent_groups={a: [agent_0]}"])
    with pytest.raises(ConfigError, match="is single-agent; remove policy.agent_groups"):
        validate_config(cfg)
    validate_config(load_preset("mpe_ppo"))  # the preset itself is fine


def test_rollout_batch_answers_multi_agent_env_rets_per_env_worker():
    # The per-step path (and the engine's evaluation) answers MultiAgentEnvRets: one forward over every
    # worker's rows, each worker's rows back as its own per-agent response.
    from rlightning.types import MultiAgentEnvRet, MultiAgentPolicyResponse

    p = policy()
    p.set_deterministic(True)
    rng = np.random.default_rng(0)
    rets = [
        MultiAgentEnvRet(env_id, {a: rng.random((n, 3), dtype=np.float32) for a in AGENTS})
        for env_id, n in (("ma-0", 4), ("ma-1", 2))
    ]
    resps = p.rollout_batch(rets)
    assert [r.env_id for r in resps] == ["ma-0", "ma-1"]
    assert all(type(r) is MultiAgentPolicyResponse and r.weight_version == p.weight_version for r in resps)
    for ret, resp in zip(rets, resps):
        direct = p.compute_actions(ret.observation, deterministic=True)
        for key in ("action", "value"):
            assert set(getattr(resp, key)) == set(AGENTS)
            for a in AGENTS:
                np.testing.assert_allclose(getattr(resp, key)[a], direct[key][a], rtol=1e-6, atol=1e-6)


def test_rollout_batch_rejects_observations_that_are_not_per_agent():
    from rlightning.types import EnvRet, MultiAgentEnvRet

    p = policy()
    with pytest.raises(TypeError, match="'ma-0'.*dict of agent id"):
        p.rollout_batch([EnvRet("ma-0", np.zeros((4, 3), dtype=np.float32))])
    uneven = {"agent_0": np.zeros((4, 3)), "agent_1": np.zeros((3, 3)), "agent_2": np.zeros((4, 3))}
    with pytest.raises(ValueError, match="same leading num_envs.*'agent_1': 3"):
        p.rollout_batch([MultiAgentEnvRet("ma-0", uneven)])
    with pytest.raises(TypeError, match="EnvRet items, got str at position 0"):
        p.rollout_batch(["not an env ret"])
