"""It learns, multi-agent: one PPO policy shared by all agents (the mpe_ppo preset's algorithm) beats random play.

The run goes through the whole multi-agent path: per-agent records from the env workers, the buffer with
per-agent GAE and masks, `MultiAgentPolicy` with shared parameters. The env is the built-in 3-agent
``rendezvous`` (fast enough for CI; MPE simple_spread needs far more steps, see the multi-agent figures in
benchmarks/README.md).
"""

import numpy as np
import pytest

from rlightning.env import RendezvousEnv
from rlightning.env.utils.episodes import done_mask
from rlightning.types import MultiAgentPolicyResponse
from rlightning.utils.config import EnvConfig, apply_overrides, load_preset

RENDEZVOUS = ["env.backend=gymnasium", "env.name=rendezvous", "env.env_kwargs={num_agents: 3}", "env.num_envs=16"]


def random_team_return(seed: int, steps: int = 200) -> float:
    env = RendezvousEnv(EnvConfig(name="rendezvous", num_envs=16, env_kwargs={"num_agents": 3}))
    rng = np.random.default_rng(seed)
    ret = env.reset(seed=seed)
    returns = []
    for _ in range(steps):
        action = {a: rng.integers(0, 3, 16) for a in env.agent_ids}
        ret = env.step(MultiAgentPolicyResponse(env.env_id, action=action))
        returns += ret.info["episode_return"][done_mask(ret.last_terminated, ret.last_truncated)].tolist()
    return float(np.mean(returns))


@pytest.mark.slow
def test_shared_ppo_policy_learns_to_meet(tmp_path, build):
    random_return = random_team_return(seed=0)
    assert random_return < -2.0  # random agents rarely meet within 32 steps (team return about -2.6 to -3.1)
    cfg = apply_overrides(
        load_preset("mpe_ppo"),
        RENDEZVOUS + ["train.rollout_steps=64", "train.iterations=12", "log.progress=false", f"log.run_dir={tmp_path}"],
    )
    assert cfg.policy.agent_groups is None  # parameters shared by all agents
    e = build(cfg).engine
    e.run()
    m = e.last_metrics
    # 12 iterations x 16 envs x 64 steps = 12288 env steps (36864 agent steps); seeds 0, 1, 2 reach 2.2 - 2.3
    assert m["episode_return_mean"] >= 1.5, m
    assert m["episode_return_mean"] - random_return >= 3.5, (m, random_return)
    assert set(k for k in m if k.startswith("agent_return_mean/")) == {f"agent_return_mean/agent_{i}" for i in range(3)}
    assert m["agent_return_mean/agent_0"] == pytest.approx(m["episode_return_mean"] / 3, rel=0.2)


@pytest.mark.slow
def test_shared_dqn_policy_learns_to_meet_from_replay(tmp_path, build):
    """Off-policy multi-agent: one DQN for all agents, trained on each agent's replay transitions."""
    random_return = random_team_return(seed=0)
    cfg = apply_overrides(
        load_preset("cartpole_dqn"),
        RENDEZVOUS
        + [
            "cluster.inference=env_workers",
            "policy.hidden_sizes=[64, 64]",
            "policy.optim={lr: 0.001, max_grad_norm: 10.0}",
            "policy.epsilon_decay_steps=3000",
            "policy.target_update_interval=256",
            "train.rollout_steps=16",
            "train.batch_size=128",
            "train.learning_starts=512",
            "train.updates_per_iteration=16",
            "train.iterations=30",
            "train.total_env_steps=null",
            "buffer.capacity=50000",
            "log.progress=false",
            f"log.run_dir={tmp_path}",
        ],
    )
    e = build(cfg).engine
    e.run()
    m = e.last_metrics
    # 30 iterations x 16 envs x 16 steps = 7680 env steps; seeds 1, 2, 3 reach 2.2 - 2.5 (random play about -2.8)
    assert m["env_steps"] == 7680
    assert m["episode_return_mean"] >= 1.5, m
    assert m["episode_return_mean"] - random_return >= 3.5, (m, random_return)
    assert {f"agent_return_mean/agent_{i}" for i in range(3)} <= set(m)


def test_evaluation_plays_whole_multi_agent_episodes(tmp_path, build):
    # Multi-agent done flags are dicts per agent: an evaluation episode ends when every agent is done. The
    # rendezvous team scores 3 x (1.0 - 0.05 (L - 1)) for a meeting at step L (-0.05 each per step before it),
    # so whole episodes tie the mean return to the mean length; counting every step as an episode's end (the
    # running return -0.15 at step 1) does not.
    cfg = apply_overrides(load_preset("mpe_ppo"), RENDEZVOUS + ["log.progress=false", f"log.run_dir={tmp_path}"])
    e = build(cfg).engine
    result = e.evaluate(8)
    assert result["episodes"] == 8
    assert result["return_min"] > -4.8 + 1e-6, result  # this seed's untrained team meets in every episode
    assert result["length_mean"] > 1.0, result
    assert result["return_mean"] == pytest.approx(3 * (1.0 - 0.05 * (result["length_mean"] - 1)), abs=1e-4)
