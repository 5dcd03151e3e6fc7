# %% [markdown]
# # 05 · Asynchronous training with SAC: policy lag and the timing plots
#
# The synchronous engine (`syncrl`, notebook 01) takes turns: collect a rollout, then train, then
# sync weights, then collect again. While the learner trains, the env workers wait, and the other
# way round. The **asynchronous** engine (`asyncrl`) overlaps them: a background thread keeps
# stepping the envs with the eval workers' current weights while the learner samples, trains and
# syncs. The price is **policy lag**: some actions are computed with weights a few gradient
# updates older than the learner's. Off-policy algorithms such as SAC tolerate that well.
#
# This notebook runs the same small SAC-on-Pendulum setup with both engines, measures policy lag,
# and reads the timing plots to see where each run spends its time. It takes about two minutes;
# it is not long enough to solve Pendulum (the `pendulum_sac_async` preset is).

# %%
import matplotlib.pyplot as plt

from rlightning.notebook import Lab
from rlightning.utils.config import apply_overrides, load_preset

lab = Lab.local(num_cpus=4, log_to_driver=False)
lab

# %% [markdown]
# ## 1. A small SAC config
#
# We start from the `pendulum_sac_async` preset and shrink it: smaller networks, 8 gradient
# updates per iteration instead of 64 (and a policy lag bound of 4, section 4), and training starts
# after 256 env steps. Two env workers run as Ray actors, and so does the eval worker that computes
# their actions, so that acting and learning can truly run at the same time.

# %%
# NBVAL_CHECK_OUTPUT
small = [
    "seed=0",
    "env.num_workers=2", "env.num_envs=2", "env.num_cpus=0.5",
    "policy.hidden_sizes=[64, 64]",
    "train.iterations=40", "train.rollout_steps=16", "train.batch_size=128",
    "train.learning_starts=256", "train.updates_per_iteration=8", "train.max_policy_lag=4",
    "cluster.eval_each_cpu_num=0.5",
    "log.jsonl=false", "log.progress=false",
]
async_cfg = apply_overrides(load_preset("pendulum_sac_async"), small)
sync_cfg = async_cfg.model_copy(deep=True)
sync_cfg.engine = "syncrl"
for cfg in (sync_cfg, async_cfg):
    chunk = cfg.train.rollout_steps * cfg.env.num_workers * cfg.env.num_envs
    print(f"{cfg.engine}: {cfg.policy.type} on {cfg.env.name}, {chunk} env steps and "
          f"{cfg.train.updates_per_iteration} updates of {cfg.train.batch_size} per iteration")

# %% [markdown]
# ## 2. The synchronous baseline
#
# Two runs can live in one Lab under different names.

# %%
sync_run = lab.build(sync_cfg, name="sync")
sync_history = sync_run.run()
print(f"syncrl: {sync_run.engine.env_steps} env steps in {sum(m['iteration_time'] for m in sync_history):.1f} s")

# %% [markdown]
# ## 3. The asynchronous run, in the background
#
# `run.start()` trains in a background thread and returns at once, so the notebook stays usable:
# the control panel below updates while it trains (its buttons pause, resume or stop it), and you
# can look at anything in the meantime. `run.wait()` blocks until it is done; `run.stop()` would
# end it early, after the current phase.

# %%
async_run = lab.build(async_cfg, name="async")
async_run.start()
panel = async_run.show()

# %%
async_history = async_run.wait()
panel.close()
print(f"asyncrl: {async_run.engine.env_steps} env steps in {sum(m['iteration_time'] for m in async_history):.1f} s")

# %% [markdown]
# Both runs did the same number of iterations, gradient updates and weight syncs. Each asyncrl
# iteration waits for at least one chunk of new env steps, and the rollout thread may run up to two
# chunks ahead, so the async run collects at least as many steps:

# %%
# NBVAL_CHECK_OUTPUT
print("iterations:", len(sync_history), len(async_history))

print("async collected at least as many env steps:", async_run.engine.env_steps >= sync_run.engine.env_steps)

# %% [markdown]
# ## 4. Policy lag
#
# The learner's weights change with every gradient update; the eval workers get them only at the
# weight sync that ends each iteration. An action's **policy lag** is how many learner updates its
# weights were behind the learner's when it was computed: every `PolicyResponse` carries the
# `weight_version` of the weights that computed it, and the engine knows how many updates each
# version holds. `policy_lag` is the mean over an iteration's actions, `policy_lag_max` the largest.
# Actions taken while the learner trains lag; those taken right after a sync do not. The
# synchronous engine cannot lag (it never acts while it trains), so it does not report it.
#
# `train.max_policy_lag` bounds the lag: before acting, the rollout thread waits while the acting
# weights are more updates behind than that, until the next sync. The small config above sets it to
# 4 with 8 updates per iteration, so the bound is what stops the lag at 4 (the preset sets 64, one
# iteration's updates; the default is 4); `max_policy_lag=0` would make the thread act only with
# the newest weights (and wait out every train phase).

# %%
lags = [m["policy_lag_max"] for m in async_history if "policy_lag_max" in m]
print(f"policy lag reported in {len(lags)} of {len(async_history)} iterations, largest: {max(lags)} updates")
recent = [m["policy_lag"] for m in async_history if "policy_lag" in m][-10:]
print(f"mean lag of the actions, last {len(recent)} iterations: {sum(recent) / len(recent):.2f} updates")


def collection_hidden(run) -> float:
    """Seconds of env stepping, inference and buffer writes not spent inside the rollout phase."""
    records = run.timing.records
    working = sum(r.get("env_step", 0) + r.get("inference", 0) + r.get("buffer_add", 0) for r in records)
    return working - sum(r.get("rollout", 0) for r in records)


print(f"collection overlapped with learning: syncrl {max(0.0, collection_hidden(sync_run)):.1f} s, "
      f"asyncrl {max(0.0, collection_hidden(async_run)):.1f} s")

# %%
# NBVAL_CHECK_OUTPUT
print("sync run reports a lag:", any("policy_lag" in m for m in sync_history))
print("async run reports a lag:", bool(lags))
print("every action within max_policy_lag:", max(lags) <= async_cfg.train.max_policy_lag)

# %% [markdown]
# ## 5. Reading the timing plots
#
# `run.timing.plot()` stacks the time of each phase per iteration. Side by side:
#
# - **syncrl**: every iteration is `rollout` (env steps + inference) **plus** `update_dataset` +
#   `train` + `sync_weights`. The phases add up.
# - **asyncrl**: `rollout` is only the time spent *waiting* for the next chunk of env steps. When
#   it is near zero, the envs keep up with the learner and the learner is the bottleneck; when it
#   dominates, the learner waits for data and more env workers would help.
#
# The first iterations of both runs collect only (training starts after `learning_starts` steps).
#
# **Why asyncrl is no faster here.** Overlapping acting and learning pays when there are cores to
# run them at the same time. This notebook was executed on two CPU cores, shared by the two env
# workers, the eval worker, the learner and the notebook itself: while the learner trains, the
# rollout thread competes with it for the same cores instead of running beside it, so the total
# work per env step is the same and the async run is about as fast as the sync one. On a machine
# with spare cores (or a GPU learner) the rollout time hides behind the train time and asyncrl
# collects more env steps per second.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 3.5), sharey=True)
sync_run.timing.plot(ax=axes[0])
async_run.timing.plot(ax=axes[1])
axes[0].set_title("syncrl: time per phase")
axes[1].set_title("asyncrl: time per phase")
plt.show()

# %% [markdown]
# `summary()` gives the same numbers as a dict: total, mean and last seconds per phase, and each
# phase's share of the iteration time. The rollout parts (`env_step`, `inference`, `buffer_add`)
# are measured inside the rollout; in the async run they run in the background thread, so they
# overlap the other phases instead of adding to them.

# %%
for name, run in (("syncrl", sync_run), ("asyncrl", async_run)):
    summary = run.timing.summary()
    shares = ", ".join(f"{phase} {summary[phase]['share']:.0%}" for phase in ("rollout", "train") if phase in summary)
    steps_per_s = run.engine.env_steps / sum(r.get("rollout", 0) + r.get("update_dataset", 0) + r.get("train", 0) + r.get("sync_weights", 0) for r in run.timing.records)
    print(f"{name:8s} {steps_per_s:7.0f} env steps/s; share of iteration time: {shares}")

# %% [markdown]
# `plot_latency()` shows how long data spends in transit: **env -> policy** (an observation from
# the env worker to the eval worker) and **policy -> buffer** (an action to its transition being
# stored). With Ray actors these are a few milliseconds; large tails point at an overloaded node.
# `plot_throughput()` shows env steps per second over wall time; the line breaks where the run was
# idle (between two runs of cells), instead of drawing a rate across time in which nothing ran.

# %%
fig, axes = plt.subplots(1, 2, figsize=(12, 3.5))
async_run.timing.plot_latency(ax=axes[0])
async_run.timing.plot_throughput(ax=axes[1])
plt.show()

# %% [markdown]
# ## Shut down

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
