# %% [markdown]
# # Course 1 · Returns and discounting
#
# An agent is judged by the rewards it collects, but not all rewards count the same: one now is usually
# worth more than one later. This notebook builds the **return** from an episode's rewards, shows what
# the **discount factor** γ does to it with a slider, and ends with the case every implementation must
# get right: an episode **cut short** by a time limit.
#
# You will use `rlightning.policy.returns.discounted_returns`, the function rlightning's learners use, and
# the episode player of `rlightning.widgets`. Exercises are at the end; their solutions are in collapsed
# cells (click the bar on the left of a collapsed cell to open it).

# %%
import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # CartPole draws with pygame: off-screen, no display needed

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
import torch
from ipywidgets import FloatSlider, interact

from rlightning.notebook.record import Episode, Recording
from rlightning.policy.returns import discounted_returns
from rlightning.widgets import EpisodePlayer

# %% [markdown]
# ## 1. An episode
#
# A random agent plays one episode of CartPole: it gets +1 for every step the pole stays up, and the
# episode **terminates** when the pole falls or the cart leaves the track. We keep the frames to watch it.

# %%
env = gym.make("CartPole-v1", render_mode="rgb_array")
env.action_space.seed(0)
obs, _ = env.reset(seed=0)
frames, rewards, done = [env.render()], [], False
while not done:
    obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
    frames.append(env.render())
    rewards.append(reward)
    done = terminated or truncated
env.close()
rewards = np.array(rewards, dtype=np.float32)
EpisodePlayer(Recording([Episode(np.stack(frames), float(rewards.sum()), len(rewards))], fps=15, env_name="CartPole-v1"))

# %%
# NBVAL_CHECK_OUTPUT
print(f"{len(rewards)} steps, rewards {rewards[:5].tolist()} ..., terminated: {terminated}, truncated: {truncated}")

# %% [markdown]
# ## 2. The return
#
# The return from step $t$ adds the rewards that follow, each discounted by how far away it is:
#
# $$G_t = r_t + \gamma\, r_{t+1} + \gamma^2 r_{t+2} + \dots = r_t + \gamma\, G_{t+1}$$
#
# With $\gamma = 1$ the return of step 0 is just the sum of the rewards. The recursion on the right is how
# it is computed: backwards from the last step, where $G_{T-1} = r_{T-1}$ because the episode terminated.

# %%
# NBVAL_CHECK_OUTPUT
def returns_by_hand(rewards, gamma):
    out, g = np.zeros_like(rewards), 0.0
    for t in reversed(range(len(rewards))):
        g = rewards[t] + gamma * g
        out[t] = g
    return out


T = len(rewards)
terminated_flags = torch.zeros(T)
terminated_flags[-1] = 1.0  # the last step ended the episode
for gamma in (1.0, 0.9):
    ours = returns_by_hand(rewards, gamma)
    library = discounted_returns(torch.from_numpy(rewards), torch.zeros(T), terminated_flags, terminated_flags, gamma)
    print(f"gamma {gamma}: G_0 = {ours[0]:.3f} by hand, {library[0].item():.3f} by rlightning")

# %% [markdown]
# ## 3. What γ does: move the slider
#
# Left: the weight $\gamma^k$ a reward $k$ steps ahead gets. Right: the return $G_t$ at every step of the
# episode above. With γ near 0 the agent only sees the next reward; near 1 it sees the whole rest of
# the episode. The dotted line marks the **effective horizon** $1/(1-\gamma)$: roughly how far ahead the
# agent looks.

# %%
def show(gamma=0.9):
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3))
    k = np.arange(60)
    left.bar(k, gamma**k, color="tab:blue")
    if gamma < 1:
        left.axvline(1 / (1 - gamma), color="k", ls=":", label=f"horizon 1/(1-γ) = {1 / (1 - gamma):.0f}")
        left.legend()
    left.set(xlabel="steps ahead k", ylabel="weight γ^k", title=f"γ = {gamma:.2f}", ylim=(0, 1.05))
    right.plot(returns_by_hand(rewards, gamma), marker=".")
    right.set(xlabel="step t", ylabel="return G_t", title="returns along the episode")
    plt.tight_layout()
    plt.show()


interact(show, gamma=FloatSlider(value=0.9, min=0.0, max=1.0, step=0.01, continuous_update=False));

# %% [markdown]
# The same plots for three values side by side, for reading without a running kernel:

# %%
fig, axes = plt.subplots(1, 3, figsize=(12, 2.6), sharey=True)
for ax, g in zip(axes, (0.5, 0.9, 1.0)):
    ax.plot(returns_by_hand(rewards, g), marker=".")
    ax.set(title=f"γ = {g}", xlabel="step t")
axes[0].set_ylabel("return G_t")
plt.tight_layout()
plt.show()

# %% [markdown]
# With γ = 1, $G_t$ counts the steps left, a straight line down to 1. With γ = 0.9 the early returns
# saturate near $1/(1-\gamma) = 10$: the agent cannot tell 30 steps left from 300.
#
# ## 4. Cut short: terminated or truncated?
#
# Gymnasium reports two different ends. **Terminated**: the task is over (the pole fell); nothing follows,
# so nothing is added after the last reward. **Truncated**: a time limit stopped the episode, but the
# task was not over; the rewards that would have followed still count, and the learner estimates them
# with its value function $V(s_T)$, the **bootstrap**:
#
# $$G_{T-1} = r_{T-1} + \gamma\, V(s_T)$$
#
# `discounted_returns` takes both flags: `terminated` (no bootstrap) and `done` (the episode stops here).
# Below, the same five rewards, once terminated and once truncated with $V(s_T) = 10$.

# %%
# NBVAL_CHECK_OUTPUT
r = torch.ones(5)
end = torch.tensor([0.0, 0, 0, 0, 1])
next_value = torch.tensor([0.0, 0, 0, 0, 10])
gamma = 0.9
as_terminated = discounted_returns(r, next_value, terminated=end, done=end, gamma=gamma)
as_truncated = discounted_returns(r, next_value, terminated=torch.zeros(5), done=end, gamma=gamma)
print("terminated:", [round(x, 3) for x in as_terminated.tolist()])
print("truncated: ", [round(x, 3) for x in as_truncated.tolist()])

# %% [markdown]
# Treating a truncation as a termination tells the agent that the world ends at the time limit: a
# CartPole agent that balances for 500 steps would learn that step 499 is worth almost nothing.
#
# ## Exercises
#
# **1.** An episode gives rewards 0, 0, 1 and then terminates. What is $G_0$ with γ = 0.9? Compute it with
# `returns_by_hand` and with `discounted_returns`.

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
rw = np.array([0.0, 0.0, 1.0], dtype=np.float32)
flags = torch.tensor([0.0, 0.0, 1.0])
print(f"by hand: {returns_by_hand(rw, 0.9)[0]:.2f}")  # 0.9 ** 2 = 0.81
print(f"rlightning: {discounted_returns(torch.from_numpy(rw), torch.zeros(3), flags, flags, 0.9)[0].item():.2f}")

# %% [markdown]
# **2.** CartPole's best episodes last 500 steps with reward 1 each. What is $G_0$ of such an episode
# with γ = 0.99, and how close is it to the limit $1/(1-\gamma)$ of an endless one?

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
g0 = returns_by_hand(np.ones(500, dtype=np.float32), 0.99)[0]
print(f"G_0 = {g0:.2f}; closed form (1 - 0.99**500) / (1 - 0.99) = {(1 - 0.99**500) / 0.01:.2f}; limit 100")

# %% [markdown]
# **3.** Which γ makes a reward 10 steps ahead count half as much as one now? Check it with the slider.

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
g = 0.5 ** (1 / 10)
print(f"gamma = 0.5 ** (1/10) = {g:.3f}; gamma ** 10 = {g**10:.3f}")

# %% [markdown]
# **4.** Truncate the random episode of section 1 at its last step instead of terminating it, with a
# bootstrap $V(s_T) = 5$ and γ = 0.9. By how much does $G_0$ change, and why so little?

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
R = torch.from_numpy(rewards)
nv = torch.zeros(T)
nv[-1] = 5.0
done_flags = torch.zeros(T)
done_flags[-1] = 1.0
g_term = discounted_returns(R, nv, terminated=done_flags, done=done_flags, gamma=0.9)[0].item()
g_trunc = discounted_returns(R, nv, terminated=torch.zeros(T), done=done_flags, gamma=0.9)[0].item()
print(f"G_0 terminated {g_term:.3f}, truncated {g_trunc:.3f}: +{g_trunc - g_term:.3f} = 0.9**{T} x 5")
# The bootstrap sits T steps after step 0, so it is weighted by gamma ** T: small for a long episode.
