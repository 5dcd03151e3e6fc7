# %% [markdown]
# # 01 · Quickstart: CartPole with PPO, cell by cell
#
# This notebook trains PPO on `CartPole-v1` until the policy balances the pole for the full
# 500 steps. On the way it shows the pieces every rlightning run is made of:
#
# 1. a **Lab**: this notebook's lease on a Ray runtime;
# 2. a typed **config**, edited in Python;
# 3. a **run**: env workers, policy workers, a data buffer and the training engine;
# 4. the **control panel** (buttons, live charts), the **learning curve** and the **timing plots**.
#
# It takes one to two minutes on a laptop with two cores.

# %% [markdown]
# ## 1. Start a Lab
#
# `Lab.local()` starts a Ray runtime inside this notebook's process, or reuses the one it already
# has: re-running the cell is safe. We ask for 4 *logical* CPUs: Ray uses them to place workers,
# and a small run fits even on a two-core machine. `log_to_driver=False` keeps the workers' log
# lines out of the notebook (Ray still writes them under `/tmp/ray/session_latest/logs`).

# %%
import matplotlib.pyplot as plt

from rlightning.notebook import Lab
from rlightning.utils.config import load_preset

lab = Lab.local(num_cpus=4, log_to_driver=False)
lab

# %% [markdown]
# ## 2. A config
#
# Presets are YAML files packaged with rlightning; `load_preset` turns one into a typed
# `MainConfig`. Every field is documented and validated, also when you assign it. The
# `cartpole_ppo` preset runs 2 env workers with 8 CartPole copies each, and stops when the mean
# return of recent episodes (the last `train.return_window`) reaches 475 (500 is the maximum).
#
# Every worker is a plain Python class that runs either in this process or as a Ray actor, chosen
# per component (`cluster.remote_env`, `remote_eval`, `remote_train`, `remote_storage`). The preset
# puts the env workers on Ray actors; here we keep them in this process: a CartPole step takes
# microseconds, far less than a round trip to another process, so this small run trains several
# times faster in-process. Expensive envs are where Ray actors pay off (notebooks 02, 04
# and 06 run their env workers on Ray).

# %%
# NBVAL_CHECK_OUTPUT
cfg = load_preset("cartpole_ppo")
cfg.seed = 1
cfg.cluster.remote_env = False  # env workers in this process: faster for a cheap env like CartPole
cfg.train.iterations = 150  # an upper bound: the run stops earlier once target_return is reached

envs = cfg.env.num_workers * cfg.env.num_envs
print(f"env     {cfg.env.name}: {cfg.env.num_workers} workers x {cfg.env.num_envs} sub-envs, remote={cfg.cluster.remote_env}")
print(f"policy  {cfg.policy.type}, hidden layers {cfg.policy.hidden_sizes}, lr {cfg.policy.optim.lr}")
print(f"rollout {cfg.train.rollout_steps} steps x {envs} sub-envs = {cfg.train.rollout_steps * envs} transitions per iteration")
print(f"stop    after {cfg.train.iterations} iterations or at mean return >= {cfg.train.target_return}")

# %% [markdown]
# A typo does not silently create a new setting: the error names the field you probably meant.

# %%
# NBVAL_CHECK_OUTPUT
try:
    cfg.train.rollout_step = 64
except AttributeError as err:
    print(str(err).split(" Valid keys")[0])  # the message goes on to list every valid key

# %% [markdown]
# ## 3. Build the run
#
# `lab.build(cfg)` validates the whole config first, then starts the env workers,
# builds the policy group (one train worker, one eval worker), a rollout buffer that computes GAE
# advantages when an episode segment closes, and the `syncrl` engine. The preset sets
# `cluster.inference = "env_workers"`: each env worker gets its own copy of the policy and acts
# with it, so a whole rollout is one call per env worker (with `"eval_workers"` the eval worker
# answers every step instead, the layout for policies on GPUs).
# Building again under the same name stops the previous run first, so this cell can be re-run.
# It also checks that the cluster has the CPUs the config asks for, and fails at once (naming what
# is missing) rather than waiting. The run writes its `metrics.jsonl` under a temporary folder
# (`run.engine.run_dir`), not next to this notebook; set `cfg.log.run_dir` to choose the place.

# %%
run = lab.build(cfg)

# %%
# NBVAL_CHECK_OUTPUT
print(run)
print("env workers:", run.env_group.env_ids)

# %% [markdown]
# ## 4. One iteration
#
# `run.step()` runs one iteration of the synchronous engine: **rollout** (128 env steps on every
# worker, each action computed by the worker's policy copy, every transition added to the buffer),
# **update_dataset** (the buffer hands its data to the train worker), **train** (PPO epochs) and
# **sync_weights** (train -> eval). It returns the iteration's metrics.

# %%
metrics = run.step()
{key: round(value, 3) if isinstance(value, float) else value for key, value in metrics.items()}

# %% [markdown]
# The same keys come back every iteration: the engine's counters, the episode statistics of the env
# workers, and whatever the policy's `train()` returned (here PPO's losses).

# %%
# NBVAL_CHECK_OUTPUT
for key in ("iteration", "env_steps", "episode_return_mean", "policy_loss", "value_loss", "weight_version"):
    print(f"{key:20s} {key in metrics}")

# %% [markdown]
# ## 5. The control panel
#
# `run.show()` displays the run's control panel. **Step** runs one iteration, **Run N** runs N,
# **Pause** holds after the current iteration and **Resume** goes on, **Stop** ends the run after
# the current phase. A run started from the panel trains in the background, so the notebook stays
# usable. The status line says what happened ("target return 475 reached at iteration ...",
# "stopped at iteration ..."), the charts show the mean return against env steps, the losses,
# entropy and KL, and the throughput (each smoothed; the faint line is the raw value). The fields
# change hyperparameters from the next iteration on (the same as `run.set`, below). The sections
# below the charts (buffer, episodes, timing, workers) open with a click; empty ones are hidden.

# %%
panel = run.show()

# %% [markdown]
# ## 6. Train
#
# `run.run()` runs iterations until `train.iterations` or `train.target_return` is reached, with a
# progress line that counts the run's iterations as the panel does, and ends with the reason it
# stopped. Interrupting the kernel (the stop button) stops cleanly between two phases, and
# `run.run()` continues where it stopped. To keep the notebook usable while it trains, use
# `run.start()` (or the panel's Run N) instead: it trains in a background thread, and `run.stop()`
# ends it.

# %%
history = run.run()
last = run.metrics[-1]
print(run.status["message"])
print(f"{last['env_steps']} env steps, mean return of the last {cfg.train.return_window} episodes: "
      f"{last['episode_return_mean']:.1f}")

# %% [markdown]
# The run stops as soon as the mean return of the last `train.return_window` episodes reaches
# 475, at the iteration the line above names (it depends on the seed and the machine's timing of
# the episodes; a minute or so on two CPU cores). The check below only asks that the policy
# clearly learned (a random policy scores about 22).

# %%
# NBVAL_CHECK_OUTPUT
best = max(m.get("episode_return_mean", 0.0) for m in run.metrics)
print("learned to balance the pole:", best > 200)

# %% [markdown]
# ## 7. The learning curve
#
# `run.metrics` holds one dict per iteration (the same rows are written to `metrics.jsonl` in the
# run folder); `run.metrics_df()` gives them as a pandas DataFrame, one row per iteration.

# %%
run.metrics_df()[["env_steps", "episode_return_mean", "policy_loss", "value_loss", "entropy"]].tail()

# %% [markdown]
# Plotted against env steps:

# %%
steps = [m["env_steps"] for m in run.metrics if "episode_return_mean" in m]
returns = [m["episode_return_mean"] for m in run.metrics if "episode_return_mean" in m]
fig, ax = plt.subplots(figsize=(7, 3.5))
ax.plot(steps, returns)
ax.axhline(cfg.train.target_return, color="gray", linestyle="--", label="target")
ax.set_xlabel("env steps")
ax.set_ylabel("mean episode return")
ax.set_title("PPO on CartPole-v1")
ax.legend()
plt.show()

# %% [markdown]
# ## 8. Where does the time go?
#
# Every engine keeps per-iteration timing records. `run.timing.plot()` stacks the phases of each
# iteration; in a synchronous run the rollout (env steps plus policy inference) and the PPO update
# take turns, which is what the asynchronous engine of notebook 05 overlaps.

# %%
run.timing.plot()

# %%
summary = run.timing.summary()
for part in ("rollout", "env_step", "inference", "buffer_add", "update_dataset", "train", "sync_weights"):
    if part in summary:
        print(f"{part:15s} {summary[part]['mean'] * 1e3:8.1f} ms per iteration")

# %% [markdown]
# `plot_throughput()` shows env steps per second over the run, and `plot_latency()` how long an
# observation takes to reach the policy and an action to reach the buffer.

# %%
run.timing.plot_throughput()

# %% [markdown]
# ## 9. Change hyperparameters of a built run
#
# The workers copied the config when they started, so assigning `run.config.policy...` now would
# change nothing; rlightning says so instead of ignoring it. `run.set(...)` changes what can change
# live (learning rate, entropy and clipping coefficients, ...) on every train worker from the next
# iteration on, and the metrics record it as `set_<name>`.

# %%
# NBVAL_CHECK_OUTPUT
try:
    run.config.policy.optim.lr = 3e-4
except ValueError as err:
    print(err)
run.set(lr=3e-4, ent_coef=0.01)
print("recorded:", {k: v for k, v in run.step().items() if k.startswith("set_")})

# %% [markdown]
# ## 10. Evaluate
#
# `evaluate()` plays whole episodes with deterministic actions (the most likely action) on an env
# of its own, so training episodes are not disturbed.

# %%
result = run.engine.evaluate(num_episodes=8)
print(f"deterministic evaluation: mean return {result['return_mean']:.1f} over {result['episodes']} episodes")

# %% [markdown]
# ## 11. Shut down
#
# `lab.shutdown()` stops every worker this Lab started and then Ray itself, because this Lab
# started it. A Lab that joined an existing cluster (notebook 03) leaves the cluster running.

# %%
# NBVAL_CHECK_OUTPUT
panel.close()
lab.shutdown()
print(lab)
