# %% [markdown]
# # Course 2 · Value-based learning: DQN's Q-values and exploration
#
# A **Q-value** $Q(s, a)$ is the return an agent expects if it takes action $a$ in state $s$ and acts well
# afterwards. Knowing $Q$ is enough to act: take the action with the largest value. **DQN** learns $Q$ with
# a neural network from replayed transitions, and explores with **ε-greedy**: a random action with
# probability ε, the greedy one otherwise.
#
# On a world small enough to solve exactly, this notebook compares the Q-values DQN learns with the true
# ones, and shows what happens without exploration. It trains with rlightning's `dqn` policy, every part in
# this kernel (no Ray actors), in a few seconds.

# %%
import tempfile

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
import torch

from rlightning.notebook import Lab
from rlightning.utils.config import MainConfig

# %% [markdown]
# ## 1. A chain with a trap
#
# Ten cells in a row; the agent starts in cell 3 and moves left (action 0) or right (action 1). The left
# end (cell 0) pays **0.1** and ends the episode; the right end (cell 9) pays **1** and ends it. Everything
# else pays 0. The small prize is 3 steps away, the big one 6. The agent observes its cell as a one-hot
# vector.

# %%
class Chain(gym.Env):
    """Cells 0..length-1; start at `start`; 0.1 at the left end, 1 at the right end."""

    def __init__(self, length: int = 10, start: int = 3):
        self.length, self.start = length, start
        self.observation_space = gym.spaces.Box(0.0, 1.0, (length,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.pos = start

    def _obs(self):
        obs = np.zeros(self.length, np.float32)
        obs[self.pos] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.pos = self.start
        return self._obs(), {}

    def step(self, action):
        self.pos += 1 if int(action) == 1 else -1
        if self.pos == 0:
            return self._obs(), 0.1, True, False, {}
        if self.pos == self.length - 1:
            return self._obs(), 1.0, True, False, {}
        return self._obs(), 0.0, False, False, {}


if "Chain-v0" in gym.registry:
    del gym.registry["Chain-v0"]
gym.register(id="Chain-v0", entry_point=Chain, max_episode_steps=30)

# %% [markdown]
# ## 2. The true Q-values
#
# The world is tiny, so $Q^*$ can be computed exactly by **value iteration**: apply the Bellman optimality
# equation $Q(s, a) = r(s, a) + \gamma \max_{a'} Q(s', a')$ until nothing changes. With γ = 0.9, walking
# right from cell 3 is worth $0.9^5 \approx 0.59$; walking left and taking the small prize is worth
# less. (Cells 0 and 9 end the episode; their rows are never used.)

# %%
# NBVAL_CHECK_OUTPUT
GAMMA, N = 0.9, 10


def true_q(gamma=GAMMA, n=N):
    q = np.zeros((n, 2))
    for _ in range(200):
        v = q.max(1)
        for s in range(1, n - 1):
            for a, s2 in ((0, s - 1), (1, s + 1)):
                reward = 0.1 if s2 == 0 else 1.0 if s2 == n - 1 else 0.0
                q[s, a] = reward + (0.0 if s2 in (0, n - 1) else gamma * v[s2])
    return q


Q_STAR = true_q()
print("cell   Q*(left)  Q*(right)")
for s in range(1, N - 1):
    print(f"{s:4d}   {Q_STAR[s, 0]:8.3f}  {Q_STAR[s, 1]:9.3f}")

# %% [markdown]
# ## 3. DQN
#
# The config: 4 copies of the chain in one env worker, a 64-unit Q-network, a replay buffer, 16 gradient
# steps per iteration. ε falls linearly from 1 (all random) to 0.05 over the first 1,500 env steps. The
# target network, a copy of the Q-network refreshed every 100 updates, gives the Bellman targets.
#
# `Lab.local()` starts a small Ray runtime; with every `cluster.remote_*` switch off (the default) the
# env worker, the learner and the buffer all live in this kernel, so we can look inside them.

# %%
lab = Lab.local(num_cpus=2, log_to_driver=False)


def chain_config(seed=0, epsilon_start=1.0, epsilon_end=0.05, iterations=30):
    return MainConfig(
        seed=seed,
        env={"name": "Chain-v0", "num_workers": 1, "num_envs": 4},
        policy={
            "type": "dqn", "hidden_sizes": [64], "activation": "relu", "optim": {"lr": 1e-3}, "gamma": GAMMA,
            "tau": 1.0, "target_update_interval": 100,
            "epsilon_start": epsilon_start, "epsilon_end": epsilon_end, "epsilon_decay_steps": 1500,
        },
        buffer={"type": "replay", "capacity": 10_000, "sampler": "uniform"},
        train={"iterations": iterations, "rollout_steps": 16, "batch_size": 64, "learning_starts": 200,
               "updates_per_iteration": 16},
        log={"run_dir": tempfile.mkdtemp(prefix="rlightning-course-"), "jsonl": False, "progress": False},
    )


run = lab.build(chain_config(), name="dqn")
learner = run.policy_group.train_workers[0].worker  # the DQNPolicy object itself: it lives in this kernel
one_hot_cells = torch.eye(N)


def q_table():
    with torch.no_grad():
        return learner.q_values(one_hot_cells).numpy()


# %% [markdown]
# Now train in three stretches and take a snapshot of the network's Q-values after each, together with ε
# (the learner's own schedule) and the mean return of the episodes that finished.

# %%
snapshots = {0: q_table()}
log = []
for stop in (5, 12, 30):
    while run.engine.iteration < stop:
        m = run.step()
        log.append((m["iteration"], m["env_steps"], learner.epsilon, m.get("episode_return_mean", np.nan)))
    snapshots[stop] = q_table()
for it, steps, eps, ret in log[4::5]:
    print(f"iteration {it:2d}: {steps:5d} env steps, epsilon {eps:.2f}, mean return {ret:.2f}")

# %%
fig, axes = plt.subplots(1, len(snapshots), figsize=(13, 2.8), sharey=True)
cells = np.arange(1, N - 1)
for ax, (it, q) in zip(axes, snapshots.items()):
    ax.plot(cells, Q_STAR[cells, 1], "k--", lw=1, label="Q* right")
    ax.plot(cells, Q_STAR[cells, 0], "k:", lw=1, label="Q* left")
    ax.plot(cells, q[cells, 1], "o-", color="tab:green", label="DQN right")
    ax.plot(cells, q[cells, 0], "s-", color="tab:red", label="DQN left")
    ax.set(title=f"after {it} iterations", xlabel="cell")
axes[0].set_ylabel("Q-value")
axes[-1].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# At first the network's values are noise around 0. As transitions are replayed, the values near the
# ends become right first (a reward is one step away), then the correct values spread inward one
# Bellman backup at a time. By the end the green line (right) is above the red one (left) in every cell:
# the greedy policy walks right.

# %%
# NBVAL_CHECK_OUTPUT
final = snapshots[30]
print("greedy action per cell 1..8:", ["right" if final[s, 1] > final[s, 0] else "left" for s in range(1, N - 1)])
print(f"largest error against Q*: {np.abs(final[1:N - 1] - Q_STAR[1:N - 1]).max() < 0.1} (below 0.1)")
print("evaluation return:", run.engine.evaluate(num_episodes=2)["return_mean"])

# %% [markdown]
# ## 4. Without exploration
#
# Build the same run with ε = 0 from the start: the agent always takes the action its (random) network
# likes best. Whatever it first stumbles on, it keeps doing: it never collects the transitions that would
# show the big prize.

# %%
greedy_run = lab.build(chain_config(epsilon_start=0.0, epsilon_end=0.0), name="greedy")
greedy_history = greedy_run.run(progress=False)
greedy_q = greedy_run.policy_group.train_workers[0].worker.q_values(one_hot_cells).detach().numpy()
print(f"mean return of the last episodes: {greedy_history[-1].get('episode_return_mean', float('nan')):.2f}")
print(f"Q(cell 3) = left {greedy_q[3, 0]:.2f}, right {greedy_q[3, 1]:.2f}  (true: {Q_STAR[3, 0]:.2f}, {Q_STAR[3, 1]:.2f})")

# %% [markdown]
# The greedy agent settles for the small prize (or wanders until the time limit) and its estimate of
# walking right stays far below the truth: values of actions never tried are never corrected.
# Exploration is what gives DQN the data to be wrong about, and then right.
#
# ## Exercises
#
# **1.** Change one line of `true_q` to compute $Q^*$ with γ = 0.5. Which way is optimal from cell 3 now,
# and why?

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
q_half = true_q(gamma=0.5)
print(f"cell 3: left {q_half[3, 0]:.4f}, right {q_half[3, 1]:.4f}")
# Left: 0.1 three steps away is 0.1 * 0.5**2 = 0.025; right: 1 six steps away is 0.5**5 = 0.031. Still right,
# barely. With gamma = 0.4 the small, near prize wins: a short-sighted agent prefers it.
print("gamma 0.4, cell 3 prefers:", "right" if true_q(gamma=0.4)[3].argmax() == 1 else "left")

# %% [markdown]
# **2.** `run.set` changes a float hyperparameter of a built run from its next iteration. Continue the
# greedy run for 20 iterations with `epsilon_start = epsilon_end = 0.5`. Does it find the big prize?

# %%
# your answer here

# %% [solution]
greedy_run.set(epsilon_start=0.5, epsilon_end=0.5)
more = greedy_run.run(iterations=20, progress=False)
q_after = greedy_run.policy_group.train_workers[0].worker.q_values(one_hot_cells).detach().numpy()
print(f"Q(cell 3) now: left {q_after[3, 0]:.2f}, right {q_after[3, 1]:.2f}")
print("deterministic evaluation return:", greedy_run.engine.evaluate(num_episodes=2)["return_mean"])

# %% [markdown]
# **3.** ε falls linearly from `epsilon_start` to `epsilon_end` over `epsilon_decay_steps` env steps. What
# is ε after 1,000 env steps in the first run? Compute it, then compare with the learner's own value
# (`learner.epsilon` is computed from its step count) in the log of section 3.

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
cfg = run.config.policy
eps_1000 = cfg.epsilon_start + min(1.0, 1000 / cfg.epsilon_decay_steps) * (cfg.epsilon_end - cfg.epsilon_start)
print(f"epsilon after 1000 env steps: {eps_1000:.3f}")
print("the log, around it:", [(steps, round(eps, 3)) for _, steps, eps, _ in log if 900 <= steps <= 1100])

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
