# %% [markdown]
# # 06 · Multi-agent: the rendezvous env, per-agent data, and a shared policy
#
# A multi-agent env worker works like any other: it is vectorised, answers each step with one
# return for all its sub-environments, and can run as a Ray actor. The difference is the data:
# observations, rewards and done flags are **dicts keyed by agent id** (`MultiAgentEnvRet`), and
# the actions go back as a dict too (`MultiAgentPolicyResponse`).
#
# This notebook uses the built-in `rendezvous` env: agents on a line of cells must all meet on one
# cell. It
#
# 1. looks at the per-agent data of env workers running on Ray;
# 2. plays a hand-written policy against a random one;
# 3. trains **one policy shared by all agents** (parameter sharing) with PPO, by presenting every
#    (sub-env, agent) pair to the learner as one row.
#
# It takes about two minutes.

# %%
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from rlightning.env import RendezvousEnv
from rlightning.env.utils.episodes import EpisodeTracker, done_mask
from rlightning.notebook import Lab
from rlightning.types import BatchedData, EnvMeta, EnvRet, MultiAgentPolicyResponse
from rlightning.utils.config import EnvConfig, apply_overrides, load_preset
from rlightning.utils.registry import ENVS

lab = Lab.local(num_cpus=4, log_to_driver=False)
lab

# %% [markdown]
# ## 1. The rendezvous env
#
# Three agents on a line of 8 cells. Each step every agent moves left, stays or moves right
# (`Discrete(3)`: 0, 1, 2). When they all stand on one cell the episode terminates with reward 1
# for each agent; every other step costs each agent 0.05; after 32 steps the episode is truncated.
# Agent *i* observes all positions scaled to [0, 1], its own first.
#
# Two env workers with 4 sub-environments each, as Ray actors:

# %%
env_cfg = EnvConfig(name="rendezvous", num_workers=2, num_envs=4, num_cpus=0.5, env_kwargs={"num_agents": 3})
env_group = lab.env_group(env_cfg)
env_group

# %%
# NBVAL_CHECK_OUTPUT
env_rets = env_group.reset(seed=0)
env_id, first = env_rets[0]
meta = env_group.env_metas[0]
print(type(first).__name__, "from", env_id)
print("agents:", first.agent_ids)
print("observation:", {agent: obs.shape for agent, obs in first.observation.items()})
print("last_reward:", {agent: r.tolist() for agent, r in first.last_reward.items()})
print("action space:", meta.action_space)

# %% [markdown]
# ## 2. A hand-written policy against a random one
#
# A policy answers each `MultiAgentEnvRet` with a `MultiAgentPolicyResponse` whose `action` maps
# every agent to its actions, one per sub-env. `play` steps both workers for a number of steps and
# collects the returns of finished episodes (`info["episode_return"]` is the team's return, summed
# over agents). The hand-written policy moves every agent towards the team's median position (so the
# middle agent waits for the other two).

# %%
def play(act, steps=96, seed=0):
    """Step every worker `steps` times with `act(env_ret) -> {agent: actions}`; returns the finished episodes' team returns."""
    returns = []
    env_rets = env_group.reset(seed=seed)
    for _ in range(steps):
        responses = BatchedData(
            list(env_rets.ids()),
            [MultiAgentPolicyResponse(env_id, action=act(ret)) for env_id, ret in env_rets.items()],
        )
        env_rets = env_group.step(responses)
        for _, ret in env_rets.items():
            done = done_mask(ret.last_terminated, ret.last_truncated)
            returns.extend(ret.info["episode_return"][done].tolist())
    return returns


rng = np.random.default_rng(0)


def random_actions(ret):
    return {agent: rng.integers(0, 3, len(obs)) for agent, obs in ret.observation.items()}


def towards_the_median(ret):
    actions = {}
    for agent, obs in ret.observation.items():
        own, target = obs[:, 0], np.median(obs, axis=1)
        actions[agent] = np.where(target > own, 2, np.where(target < own, 0, 1))
    return actions


random_returns = play(random_actions)
scripted_returns = play(towards_the_median)
print(f"random:   {len(random_returns):3d} episodes, mean team return {np.mean(random_returns):6.2f}")
print(f"scripted: {len(scripted_returns):3d} episodes, mean team return {np.mean(scripted_returns):6.2f}")

# %%
# NBVAL_CHECK_OUTPUT
print("the hand-written policy does better:", np.mean(scripted_returns) > np.mean(random_returns))
env_group.close()

# %% [markdown]
# ## 3. One policy for all agents
#
# The agents are interchangeable (each sees itself first, then the others), so one policy can act
# for all of them: **parameter sharing**. The learner then needs no multi-agent machinery at all
# if the env worker presents every (sub-env, agent) pair as one row of an ordinary vectorised env:
# observation `[num_envs x num_agents, num_agents]`, one reward and done flag per row. The rows of
# one sub-env finish together, and gymnasium's next-step autoreset carries over unchanged.
#
# That view is a small `BaseEnv` subclass, registered in `ENVS` under a new name. It is defined
# here in the notebook and, like in notebook 04, Ray ships it to the env workers by value.

# %%
@ENVS.register("rendezvous_shared", override=True)
class SharedRendezvous(RendezvousEnv):
    """The rendezvous env for one shared policy: row = (sub-env, agent)."""

    def __init__(self, config, worker_index=0, preprocess_fn=None):
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        self.rows = self.num_envs * self.num_agents
        self.row_episodes = EpisodeTracker(self.rows)

    def _stack(self, per_agent):
        """{agent: [num_envs, ...]} -> [num_envs x num_agents, ...], agents of one sub-env adjacent."""
        stacked = np.stack([per_agent[agent] for agent in self.agent_ids], axis=1)
        return stacked.reshape(self.rows, *stacked.shape[2:])

    def _rows(self, ret, info):
        return EnvRet(
            env_id=self.env_id, observation=self._stack(ret.observation), last_reward=self._stack(ret.last_reward),
            last_terminated=self._stack(ret.last_terminated), last_truncated=self._stack(ret.last_truncated),
            info={"episode_return": info[0], "episode_length": info[1]},
        )

    def reset(self, seed=None, options=None):
        ret = super().reset(seed=seed, options=options)
        return self._rows(ret, self.row_episodes.reset())

    def step(self, policy_resp):
        action = np.asarray(policy_resp.action).reshape(self.num_envs, self.num_agents)
        per_agent = MultiAgentPolicyResponse(self.env_id, action={a: action[:, i] for i, a in enumerate(self.agent_ids)})
        ret = super().step(per_agent)
        done = self._stack(ret.last_terminated) | self._stack(ret.last_truncated)
        return self._rows(ret, self.row_episodes.update(self._stack(ret.last_reward), done))

    def get_metadata(self):
        return EnvMeta(self.env_id, self.single_action_space, self.single_observation_space, self.rows)

# %% [markdown]
# A quick look in this process: 2 sub-envs x 3 agents = 6 rows.

# %%
# NBVAL_CHECK_OUTPUT
probe = SharedRendezvous(EnvConfig(name="rendezvous_shared", num_envs=2, env_kwargs={"num_agents": 3}))
ret = probe.reset(seed=0)
print(probe.get_metadata().num_envs, "rows; observation", ret.observation.shape, "; reward", ret.last_reward.shape)

# %% [markdown]
# ## 4. Train it with PPO
#
# The `cartpole_ppo` preset with the env swapped: PPO's networks are built for the row view's
# spaces (`Box(3)` observations, `Discrete(3)` actions), the buffer stores rows as transitions, and
# the per-row episode returns (one agent's share: +1 for meeting, -0.05 per step) feed the metrics.

# %%
cfg = apply_overrides(
    load_preset("cartpole_ppo"),
    [
        "seed=0",
        "env.name=rendezvous_shared", "env.num_workers=2", "env.num_envs=8", "env.num_cpus=0.5",
        "env.env_kwargs={num_agents: 3}",
        "policy.optim.anneal_lr=false", "policy.ent_coef=0.01",
        "train.iterations=20", "train.rollout_steps=64", "train.target_return=null",
        "log.jsonl=false", "log.progress=false",
    ],
)
cfg.log.run_dir = tempfile.mkdtemp(prefix="rlightning-multi-agent-")
run = lab.build(cfg)
history = run.run()
returns = [m["episode_return_mean"] for m in history if "episode_return_mean" in m]
print(f"mean return per agent: first iteration {returns[0]:.2f}, last {returns[-1]:.2f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot(returns)
ax.set_xlabel("iteration")
ax.set_ylabel("mean return per agent")
ax.set_title("shared PPO policy on rendezvous (3 agents)")
plt.show()

# %%
# NBVAL_CHECK_OUTPUT
print("the shared policy learned to meet:", returns[-1] > returns[0])
print(run.env_group.env_ids, "rows per worker:", [m.num_envs for m in run.env_group.env_metas])

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
