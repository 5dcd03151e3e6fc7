# %% [markdown]
# # 07 · Experiments: seeds, sweeps and statistics
#
# One run says little: a research result is a distribution over seeds and settings. This notebook
# compares two PPO learning rates on CartPole over three seeds each, with the statistics of
# Agarwal et al. (2021, "Deep RL at the Edge of the Statistical Precipice") computed by
# [rliable](https://github.com/google-research/rliable): mean, median and IQM of the final returns
# with stratified-bootstrap confidence intervals, the probability that one learning rate beats the
# other, and mean learning curves with 95% bands. Then an ASHA sweep searches the learning rate
# and stops the bad samples early.
#
# Every trial is an ordinary rlightning run, executed by
# [Ray Tune](https://docs.ray.io/en/latest/tune/index.html) on the Lab's cluster in a placement
# group of its own. The sweeps run in the background: the kernel stays free while they go.
# The runs are short (a minute or two in all), so the returns are early-training returns.

# %%
# NBVAL_CHECK_OUTPUT
import matplotlib.pyplot as plt
from ray import tune

from rlightning.notebook import Lab
from rlightning.notebook.stats import aggregates, curve_band, final_scores, probability_of_improvement
from rlightning.utils.config import apply_overrides, load_preset

lab = Lab.local(num_cpus=4, log_to_driver=False)
cfg = apply_overrides(
    load_preset("cartpole_ppo"),
    ["cluster.remote_env=false", "env.num_workers=1", "env.num_envs=4", "train.rollout_steps=64",
     "log.progress=false"],
)  # fmt: skip
print(f"PPO on {cfg.env.name}: {cfg.env.num_envs * cfg.train.rollout_steps} env steps per iteration")

# %% [markdown]
# ## 1. Two learning rates, three seeds each
#
# `lab.sweep(cfg, space, seeds=3)` runs every setting of the space with three seeds. Space keys are
# the dotted config paths the command line's overrides take; a list is a grid. The whole space is
# checked before any trial starts (a misspelt key gets the closest valid name). `exp.show()` is a
# live view: the trials table, the curves (here one mean per learning rate with its band over the
# seeds) and Stop buttons.

# %%
exp = lab.sweep(cfg, {"policy.optim.lr": [3e-4, 3e-3]}, seeds=3, stop={"iterations": 12}, name="lr-seeds")
exp.show()

# %%
exp.wait()
exp.results_df()[["policy.optim.lr", "seed", "status", "iterations", "env_steps", "last"]]

# %% [markdown]
# ## 2. Final performance with confidence intervals
#
# `final_scores` takes each trial's last `episode_return_mean`, grouped by setting (seeds pooled).
# `aggregates` gives rliable's mean, median and interquartile mean (IQM: the mean of the middle
# half of the runs, robust to one lucky or unlucky seed) with 95% stratified-bootstrap intervals.
# With one task, rliable's median (the median over tasks of each task's mean) is the mean.

# %%
scores = final_scores(exp)
table = aggregates(scores)
table.round(1)

# %% [markdown]
# The probability of improvement is the chance that a run of one setting ends above a run of the
# other (ties count half), with its bootstrap interval: an interval that stays above 0.5 is
# evidence that the first setting is better, not just luckier.

# %%
# NBVAL_CHECK_OUTPUT
fast, slow = "policy.optim.lr=0.003", "policy.optim.lr=0.0003"
poi = probability_of_improvement(scores[fast], scores[slow])
print(f"P(lr=3e-3 beats lr=3e-4) is within [0, 1]: {0 <= poi['lo'] <= poi['p'] <= poi['hi'] <= 1}")

# %%
print(f"P(lr=3e-3 beats lr=3e-4) = {poi['p']:.2f}, 95% CI [{poi['lo']:.2f}, {poi['hi']:.2f}]")

# %% [markdown]
# ## 3. Learning curves with confidence bands
#
# `curve_band` interpolates each seed's return curve onto common env-step points and bootstraps
# the mean at each point (rliable's stratified bootstrap, as in its sample-efficiency curves).

# %%
band = curve_band(exp, points=30)
fig, ax = plt.subplots(figsize=(7, 3.5))
for label, part in band.groupby("config"):
    ax.plot(part["env_steps"], part["mean"], label=label)
    ax.fill_between(part["env_steps"], part["lo"], part["hi"], alpha=0.25)
ax.set_xlabel("env steps")
ax.set_ylabel("episode return (mean, 95% CI)")
ax.legend()
plt.show()

# %% [markdown]
# ## 4. An ASHA search over the learning rate
#
# Four samples of a log-uniform learning rate; ASHA (asynchronous successive halving) compares
# trials at rungs (here iterations 2, 4 and 8) and stops the worse half at each, so the budget goes
# to the promising ones. `exp.best_config()` is the best trial's config, ready for `lab.build`.

# %%
asha = lab.sweep(
    cfg,
    {"policy.optim.lr": tune.loguniform(1e-4, 1e-2)},
    num_samples=4,
    scheduler="asha",
    stop={"iterations": 12},
    scheduler_options={"grace_period": 2, "reduction_factor": 2},
    name="lr-asha",
)
asha.wait()
df = asha.results_df()
df[["policy.optim.lr", "status", "iterations", "env_steps", "last", "best"]]

# %%
# NBVAL_CHECK_OUTPUT
print("trials:", len(df), "| every trial finished or was stopped early:", set(df["status"]) == {"TERMINATED"})
print("best trial's lr is the best config's:", asha.best_config().policy.optim.lr
      == df.set_index("trial_id").loc[asha.best_trial(), "policy.optim.lr"])  # fmt: skip

# %%
print(f"best lr {asha.best_config().policy.optim.lr:.2e}; ASHA used {df['env_steps'].sum()} env steps "
      f"of the {len(df) * df['env_steps'].max()} a full grid of these trials would")  # fmt: skip

# %% [markdown]
# The best config trains like any other: `lab.build(asha.best_config()).run()`.
# The command line does the same sweep: `rlightning sweep cartpole_ppo --space space.yaml
# --samples 4 --scheduler asha`. With `log.mlflow=true` or `log.wandb=true` each trial is also one
# MLflow or Weights & Biases run, grouped by the sweep's name.

# %%
lab.shutdown()
lab
