# %% [markdown]
# # Course 3 · Policy gradients and PPO's clip
#
# A **policy-gradient** method changes the policy's parameters in the direction that makes actions with a
# positive **advantage** (better than expected) more likely. The catch: the data came from the *old*
# policy, and a step that changes the policy too much makes that data meaningless and can wreck the
# agent. **PPO** limits each update with a **clip** on the probability ratio.
#
# This notebook plots PPO's clipped objective, then trains PPO on CartPole in the live control panel while
# changing the clip coefficient, and watches two numbers PPO reports every iteration: the **KL divergence**
# between the old and the new policy (how far it moved) and the **clip fraction** (how many samples hit
# the clip).

# %%
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from rlightning.notebook import Lab
from rlightning.utils.config import load_preset

# %% [markdown]
# ## 1. The clipped objective
#
# For a sample with advantage $A$, the **ratio** $r = \pi_\text{new}(a|s) / \pi_\text{old}(a|s)$ says how much
# more likely the new policy makes the action. The plain policy-gradient objective is $r A$. PPO maximises
#
# $$L^\text{clip} = \min\big(r A,\ \operatorname{clip}(r, 1-\epsilon, 1+\epsilon)\, A\big)$$
#
# Where $A > 0$ the objective stops rising once $r > 1+\epsilon$: pushing the action's probability further
# earns nothing, so the gradient is zero. Where $A < 0$ it stops falling once $r < 1-\epsilon$. The `min`
# keeps the pessimistic value, so a move that made things *worse* is never clipped away.

# %%
def clipped_objective(r, advantage, eps):
    return np.minimum(r * advantage, np.clip(r, 1 - eps, 1 + eps) * advantage)


r = np.linspace(0.0, 2.0, 201)
fig, axes = plt.subplots(1, 2, figsize=(10, 3), sharex=True)
for ax, adv in zip(axes, (1.0, -1.0)):
    ax.plot(r, r * adv, "k:", label="r A (no clip)")
    for eps, color in ((0.1, "tab:red"), (0.2, "tab:blue"), (0.5, "tab:green")):
        ax.plot(r, clipped_objective(r, adv, eps), color=color, label=f"clip ε = {eps}")
    ax.axvline(1.0, color="grey", lw=0.5)
    ax.set(title=f"advantage A = {adv:+.0f}", xlabel="ratio r = π_new / π_old", ylabel="objective")
axes[0].legend(fontsize=8)
plt.tight_layout()
plt.show()

# %% [markdown]
# ## 2. PPO on CartPole, in the live panel
#
# The `cartpole_ppo` preset, made small and eager: one env worker with 8 sub-envs in this kernel,
# 1,024 steps per iteration, 10 epochs over each batch with a large learning rate, so that the clip has work
# to do. `run.show()` opens the control panel: its charts update while the cells below train.
#
# PPO reports after every iteration:
#
# - `approx_kl`: an estimate of $\mathrm{KL}(\pi_\text{old} \,\|\, \pi_\text{new})$ over the batch: how far the update moved the policy;
# - `clipfrac`: the fraction of samples whose ratio ended outside $[1-\epsilon, 1+\epsilon]$.

# %%
lab = Lab.local(num_cpus=2, log_to_driver=False)
cfg = load_preset("cartpole_ppo")
cfg.seed = 0
cfg.env.num_workers, cfg.env.num_envs = 1, 8
cfg.cluster.remote_env = False
cfg.train.rollout_steps = 128
cfg.policy.update_epochs = 10
cfg.policy.optim.lr, cfg.policy.optim.anneal_lr = 3e-3, False
cfg.log.run_dir, cfg.log.progress = tempfile.mkdtemp(prefix="rlightning-course-"), False
run = lab.build(cfg)
run.show()

# %% [markdown]
# `run.set(clip_coef=...)` changes the clip coefficient from the next iteration on; the metrics record it as
# `set_clip_coef`. Train 6 iterations at each of 0.2, 0.05 and 0.5.

# %%
for clip in (0.2, 0.05, 0.5):
    run.set(clip_coef=clip)
    run.run(iterations=6, progress=False)
df = run.metrics_df()
df[["set_clip_coef", "approx_kl", "clipfrac", "episode_return_mean"]].round(4).tail(8)

# %%
fig, axes = plt.subplots(1, 3, figsize=(13, 3), sharex=True)
for ax, key, title in zip(
    axes,
    ("approx_kl", "clipfrac", "episode_return_mean"),
    ("KL(old ‖ new) per update", "fraction of samples clipped", "mean episode return"),
):
    ax.plot(df["iteration"], df[key], marker=".")
    for start in range(0, len(df), 6):
        phase = df.iloc[start : start + 6]
        ax.axvspan(phase["iteration"].min() - 0.5, phase["iteration"].max() + 0.5, alpha=0.08 * (1 + start // 6 % 2))
        ax.text(phase["iteration"].mean(), ax.get_ylim()[1] * 0.92, f"ε={phase['set_clip_coef'].iloc[0]}", ha="center")
    ax.set(title=title, xlabel="iteration")
plt.tight_layout()
plt.show()

# %% [markdown]
# Read the three phases:
#
# - **ε = 0.05**: the policy barely moves (KL near zero), yet about as many samples are clipped as with
#   0.2: a tiny change takes a ratio out of the narrow band, and its gradient stops there. Learning slows down.
# - **ε = 0.5**: the policy moves much further per update (KL several times larger), and few samples
#   reach the wide band. Updates are big, and noisier.
# - **ε = 0.2**, the usual default, sits between: the first phase.
#
# The clip coefficient is a **trust region** in disguise: it bounds how far one batch of data may push the
# policy.

# %%
# NBVAL_CHECK_OUTPUT
kl = df.groupby("set_clip_coef")["approx_kl"].mean()
print("mean KL ordered by the clip coefficient:", bool(kl[0.05] < kl[0.2] < kl[0.5]))

# %% [markdown]
# ## Exercises
#
# **1.** By hand, then with `clipped_objective`: with ε = 0.2, what is the objective of a sample with
# $r = 1.5$ and $A = 2$? And with $A = -2$? Why does the second not get clipped?

# %%
# your answer here

# %% [solution]
# NBVAL_CHECK_OUTPUT
print(clipped_objective(1.5, 2.0, 0.2), clipped_objective(1.5, -2.0, 0.2))
# A = 2: min(1.5 x 2, 1.2 x 2) = 2.4, the gain is capped. A = -2: min(-3.0, -2.4) = -3.0: the update made a bad
# action more likely, and the pessimistic min keeps the full penalty, so the gradient still pushes it back.

# %% [markdown]
# **2.** From `df`, compute the mean clip fraction for each clip coefficient. Why does ε = 0.5 clip so
# few samples although the policy moves much further than with ε = 0.05?

# %%
# your answer here

# %% [solution]
print(df.groupby("set_clip_coef")["clipfrac"].mean().round(3))
# With 0.5 a ratio must change by half before it is clipped: even a large move of the whole policy leaves
# most single-sample ratios inside that band. With 0.05 a change of 5% is enough, so a sample stops pushing
# after a tiny step: many samples reach the band while the policy as a whole hardly moves.

# %% [markdown]
# **3.** PPO has a second brake: `target_kl` stops the epochs of an update early once the KL passes it.
# Set `clip_coef=0.5` and `target_kl=0.005` with `run.set`, train 3 iterations and compare their KL with
# the ε = 0.5 phase above.

# %%
# your answer here

# %% [solution]
run.set(clip_coef=0.5, target_kl=0.005)
braked = run.run(iterations=3, progress=False)
print("KL with target_kl 0.005:", [round(m["approx_kl"], 4) for m in braked])
print("KL in the ε = 0.5 phase: ", df[df["set_clip_coef"] == 0.5]["approx_kl"].round(4).tolist())

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
