# %% [markdown]
# # 06 · Multi-agent: PettingZoo envs, per-agent records, and one policy shared by all agents
#
# A multi-agent env worker works like any other: it is vectorised, answers each step with one
# return for all its sub-environments, and can run as a Ray actor. The difference is the data:
# observations, rewards and done flags are **dicts keyed by agent id** (`MultiAgentEnvRet`), and
# the actions go back as a dict too (`MultiAgentPolicyResponse`).
#
# Any PettingZoo parallel env is an env worker with `env.backend: pettingzoo` and
# `env.name: "<package>:<env module>"` (`pip install "rlightning[pettingzoo]"`). This notebook uses
# MPE's `simple_spread` from `mpe2`: N agents should cover N landmarks without colliding; every agent
# is rewarded by how close the landmarks' nearest agents are, minus its collisions. It
#
# 1. looks at the per-agent data of PettingZoo env workers running on Ray, and plays random agents;
# 2. looks at a rollout record: every agent's data nested under `agents.<id>`, with its own `valid` mask;
# 3. maps agents to policies (`policy.agent_groups`): one set of parameters for all, or one per group;
# 4. trains the `mpe_ppo` preset (PPO, parameters shared by all agents) and reads the per-agent returns.
#
# It takes about three minutes.

# %%
import tempfile

import matplotlib.pyplot as plt
import numpy as np
from IPython.display import HTML

from rlightning.env import PettingZooEnv, RolloutWorker
from rlightning.env.utils.episodes import done_mask
from rlightning.notebook import Lab
from rlightning.policy.multi_agent import MultiAgentPolicy
from rlightning.types import BatchedData, MultiAgentPolicyResponse
from rlightning.utils.config import EnvConfig, PolicyConfig, apply_overrides, load_preset
from rlightning.widgets.episode_table import EpisodeTableWidget

lab = Lab.local(num_cpus=4, log_to_driver=False)
lab

# %% [markdown]
# ## 1. PettingZoo env workers
#
# Three agents, episodes of 25 steps (`max_cycles`), five discrete actions per agent (stay, left,
# right, down, up). Two env workers with 4 copies of the env each, as Ray actors:

# %%
env_cfg = EnvConfig(
    backend="pettingzoo", name="mpe2:simple_spread_v3", num_workers=2, num_envs=4, num_cpus=0.5,
    env_kwargs={"N": 3, "max_cycles": 25},
)
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
print("last_reward:", {agent: r.dtype.name for agent, r in first.last_reward.items()})
print("active:", {agent: m.tolist() for agent, m in first.info["active"].items()})
print("action space:", meta.action_space)

# %% [markdown]
# `info["active"]` says which agents act on the observation: an agent that left the episode early
# (a PettingZoo env drops it from `env.agents`) stays done, with reward 0, until every agent of its
# sub-environment is done; then the sub-environment resets on the next step (gymnasium's next-step
# autoreset). In `simple_spread` every agent stays for the whole episode.
#
# Random agents, for reference: `info["episode_return"]` is the team's return (summed over agents),
# `info["agent_episode_return"]` each agent's own.

# %%
def play_random(steps=100, seed=0):
    """Step every worker `steps` times with uniform random actions; the finished episodes' returns."""
    rng = np.random.default_rng(seed)
    team, per_agent = [], {}
    env_rets = env_group.reset(seed=seed)
    for _ in range(steps):
        responses = BatchedData(
            list(env_rets.ids()),
            [
                MultiAgentPolicyResponse(env_id, action={a: rng.integers(0, 5, len(o)) for a, o in ret.observation.items()})
                for env_id, ret in env_rets.items()
            ],
        )
        env_rets = env_group.step(responses)
        for _, ret in env_rets.items():
            done = done_mask(ret.last_terminated, ret.last_truncated)
            team.extend(ret.info["episode_return"][done].tolist())
            for agent, r in ret.info["agent_episode_return"].items():
                per_agent.setdefault(agent, []).extend(r[done].tolist())
    return team, per_agent


random_team, random_agents = play_random()
random_return = float(np.mean(random_team))
print(f"random agents: {len(random_team)} episodes, mean team return {random_return:.1f}")
print("per agent:", {a: round(float(np.mean(r)), 1) for a, r in random_agents.items()})
env_group.close()

# %% [markdown]
# ## 2. A rollout record, nested per agent
#
# An env worker that holds a copy of the policy (`cluster.inference: env_workers`) steps a whole
# rollout and returns it as one `[num_envs, T]` TensorDict. In a multi-agent record every agent's
# observation, action, policy outputs and `valid` mask sit under `agents.<id>`, its next
# observation, reward and flags under `next.agents.<id>`; the sub-env's `valid`, `episode_id` and
# done flags (done once every agent is) stay at the root, where the buffer cuts episodes. The
# buffer stores it as it is; a policy group's batch takes only the valid steps of its agents, so
# nothing of an agent that had finished reaches the loss.
#
# Here one worker in this process, episodes of 5 steps, a rollout of 8 steps:

# %%
# NBVAL_CHECK_OUTPUT
short = EnvConfig(backend="pettingzoo", name="mpe2:simple_spread_v3", num_envs=2, env_kwargs={"N": 3, "max_cycles": 5})
worker = RolloutWorker(PettingZooEnv, short)
worker.attach_policy(MultiAgentPolicy, PolicyConfig(type="ppo"), worker.get_metadata(), seed=0)
worker.reset(seed=0)
record = worker.collect(8).record
print(record.batch_size, "agents:", list(record["agents"].keys()))
print("agents.agent_0:", sorted(record["agents", "agent_0"].keys()))
print("next.agents.agent_0:", sorted(record["next", "agents", "agent_0"].keys()))
print("next.done (sub-env 0):     ", record["next", "done"][0].int().tolist())
print("agents.agent_0.valid (0):  ", record["agents", "agent_0", "valid"][0].int().tolist())
worker.env.close()

# %% [markdown]
# The episodes end at step index 4 (`max_cycles=5`); step 5 is the autoreset step (its action is
# ignored), so it is not valid for any agent.
#
# ## 3. Which policy acts for which agent
#
# `policy.agent_groups` maps agents to policies. `null` (the default) gives one group, `shared`,
# whose parameters all agents share: their observations are stacked into one batch. A map gives each
# group its own parameters; every agent must be in exactly one group, and the agents of a group need
# the same spaces. A wrong map fails when the run is built, before any worker starts:

# %%
# NBVAL_CHECK_OUTPUT
for groups in (None, {"first": ["agent_0"], "others": ["agent_1", "agent_2"]}):
    policy = MultiAgentPolicy(PolicyConfig(type="ppo", agent_groups=groups))
    policy.setup(worker.get_metadata(), seed=0)
    print(policy.groups, "->", sorted(policy.modules))

bad = apply_overrides(load_preset("mpe_ppo"), ["policy.agent_groups={first: [agent_0], others: [agent_1, agent_7]}"])
try:
    lab.build(bad)
except ValueError as err:
    print(type(err).__name__ + ":", err)

# %% [markdown]
# ## 4. Train one policy for all agents
#
# The `mpe_ppo` preset: PPO with parameters shared by all agents (as IPPO and MAPPO with parameter
# sharing do), GAE per agent, 8 copies of the env in one env worker, 400 env steps per iteration.
# 30 iterations are 12,000 env steps (36,000 agent steps): a start, where published MAPPO runs use
# millions of steps for this task.

# %%
cfg = apply_overrides(load_preset("mpe_ppo"), ["train.iterations=30", "log.jsonl=false", "log.progress=false"])
cfg.log.run_dir = tempfile.mkdtemp(prefix="rlightning-multi-agent-")
run = lab.build(cfg)
history = run.run()
team = [m["episode_return_mean"] for m in history if "episode_return_mean" in m]
agents = sorted(k.split("/", 1)[1] for k in history[-1] if k.startswith("agent_return_mean/"))
per_agent = {a: [m[f"agent_return_mean/{a}"] for m in history if f"agent_return_mean/{a}" in m] for a in agents}
print(f"mean team return: random {random_return:.1f}; first iteration {team[0]:.1f}, last {team[-1]:.1f}")
print("last per-agent returns:", {a: round(v[-1], 1) for a, v in per_agent.items()})

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3))
ax1.plot(team, label="shared PPO")
ax1.axhline(random_return, color="grey", linestyle="--", label="random")
ax1.set_xlabel("iteration")
ax1.set_ylabel("mean team return")
ax1.legend(loc="lower right")
for a, v in per_agent.items():
    ax2.plot(v, label=a)
ax2.set_xlabel("iteration")
ax2.set_ylabel("mean return per agent")
ax2.legend(loc="lower right")
fig.suptitle("mpe_ppo on simple_spread (3 agents)")
plt.show()

# %% [markdown]
# At 12,000 env steps the shared policy is still close to the random level (the dashed line), and
# the curve is noisy: each point is the mean of the last 20 episodes (`train.return_window`), each
# from random agent and landmark positions. `simple_spread` needs far more experience (published
# MAPPO and IPPO runs train for millions of env steps); this run shows the machinery. The per-agent
# returns move together, as they should with one shared policy and a reward shared by the team.
# The preset's own 1500 iterations (600k env steps, about 6 minutes on two cores) reach deterministic team
# returns of -65.7, -59.9 and -61.3 for seeds 1-3, against random play's -81.3 (`benchmarks/learning.py`'s
# `mpe_ppo` row). (The test suite shows the shared policy learning on the faster built-in `rendezvous` env.)
#
# The per-agent returns are also in the EpisodeTable view (one column per agent, for each env
# worker) and on the run's dashboard (`run.show()`):

# %%
view = EpisodeTableWidget(run.engine.buffer, run.engine.env_group.stats)
HTML(view.render_html(view.state))

# %%
# NBVAL_CHECK_OUTPUT
print("agents in the metrics:", agents)
print("env workers:", run.env_group.env_ids)

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
