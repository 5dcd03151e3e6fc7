# %% [markdown]
# # 08 · Learning from a dataset: SAC's data, then BC, CQL and IQL offline
#
# Offline RL learns from a fixed dataset, without acting in the env while it learns: logged robot
# data, a simulator sweep, an earlier run's replay buffer. This notebook makes its own datasets and
# learns from them:
#
# 1. train **SAC** on `Pendulum-v1`, saving a *medium* and an *expert* checkpoint;
# 2. collect a **medium** and an **expert** dataset from the checkpoints, and keep the run's replay
#    buffer as the **replay** dataset (D4RL's "medium-replay": everything the run saw);
# 3. train **BC**, **CQL** and **IQL** offline on the replay dataset with the `offline` engine, which
#    evaluates the policy online every few iterations;
# 4. compare their curves and normalised scores in one chart.
#
# Datasets are [Minari](https://minari.farama.org) datasets, the gymnasium ecosystem's format:
# `minari` itself reads them back, and Minari's own datasets (where the network reaches them) load
# the same way. They record what normalised scores need: a random policy's and an expert's mean
# return (D4RL's score: 0 is random, 100 the expert).
#
# **The budgets are small so that this notebook runs in a few minutes on two CPU cores** (it runs in CI): SAC trains
# for 3,200 env steps (the `pendulum_sac` preset solves Pendulum in about 10,000), and each offline
# algorithm makes 1,500 gradient steps with small networks (the presets, with the papers'
# hyperparameters, make 20,000 with 256-wide networks). The "expert" is the best this short run
# reached, and the offline results are early-training results: read them as a demonstration of the
# workflow, not as a comparison of the algorithms.

# %%
import shutil
from pathlib import Path

import matplotlib.pyplot as plt
import minari

from rlightning import datasets
from rlightning.datasets.collect import collect_dataset
from rlightning.notebook import Lab
from rlightning.policy.standalone import load_policy
from rlightning.utils.config import load_preset

lab = Lab.local(num_cpus=4, log_to_driver=False)
data = Path("runs/08_datasets")
shutil.rmtree(data, ignore_errors=True)  # a re-run starts from nothing

# %% [markdown]
# ## 1. SAC on Pendulum, with a medium and an expert checkpoint
#
# The `pendulum_sac` preset, in this process, run in two legs: the checkpoint after the first is the
# *medium* policy, the one after the second the *expert*.

# %%
cfg = load_preset("pendulum_sac")
cfg.seed = 3
cfg.cluster.remote_env = False
cfg.train.learning_starts = 256
cfg.train.eval_episodes = 5
cfg.log.progress = False
sac = lab.build(cfg, name="sac")

sac.run(iterations=25)  # 1,600 env steps
medium_ckpt = sac.save()
medium = sac.evaluate()
sac.run(iterations=25)  # 3,200 in all
expert_ckpt = sac.save()
expert = sac.evaluate()
print(f"medium checkpoint: return {medium['return_mean']:.0f} +- {medium['return_std']:.0f}")
print(f"expert checkpoint: return {expert['return_mean']:.0f} +- {expert['return_std']:.0f}")

# %% [markdown]
# ## 2. Three datasets
#
# `run.collect_dataset` plays the run's current policy and writes a Minari dataset; a checkpoint does
# the same through `rlightning.datasets.collect.collect_dataset` (or, from a shell,
# `rlightning dataset collect <checkpoint> <folder>`). `noise` adds exploration to the actions.
# `ref_max_score="policy"` records this policy's own deterministic return as the expert reference;
# the random reference is measured by playing random actions. The replay dataset is the SAC run's
# buffer, written with `rlightning.datasets.write`. Every write is atomic: a dataset is complete or
# absent.

# %%
expert_info = sac.collect_dataset(data / "expert", episodes=10, deterministic=True, ref_max_score="policy")
ref = dict(ref_min_score=expert_info.ref_min_score, ref_max_score=expert_info.ref_max_score)
medium_info = collect_dataset(load_policy(medium_ckpt), cfg, data / "medium", episodes=10, noise=0.1, **ref)
replay_info = datasets.write(sac.buffer, data / "replay", env=cfg, **ref, ref_episodes=0)
sac.close()

for name, info in (("medium", medium_info), ("expert", expert_info), ("replay", replay_info)):
    print(
        f"{name:7s} {info.total_episodes:3d} episodes {info.total_steps:6d} steps, mean return "
        f"{info.return_mean:7.1f} (normalised {info.normalized_score(info.return_mean):5.1f})"
    )

# %%
# NBVAL_CHECK_OUTPUT
for name, info in (("medium", medium_info), ("expert", expert_info), ("replay", replay_info)):
    print(f"{name}: {info.total_episodes} episodes, {info.total_steps} steps")

# %% [markdown]
# `minari` reads them as its own:

# %%
# NBVAL_CHECK_OUTPUT
read = minari.MinariDataset(data / "replay" / "data")
print(read.total_episodes, read.total_steps, read.env_spec.id, read.observation_space, read.action_space)

# %% [markdown]
# ## 3. BC, CQL and IQL offline
#
# The `pendulum_bc`, `pendulum_cql` and `pendulum_iql` presets use the `offline` engine: each
# iteration makes `train.updates_per_iteration` gradient steps on batches drawn from the dataset, and
# every `train.eval_interval` iterations the policy plays `train.eval_episodes` episodes in the env.
# A run's metrics and control panel are those of any run, with the evaluation's normalised score
# (`eval_normalized_score`). Here all three learn from the replay dataset, with small budgets.

# %%
curves = {}
for algo in ("bc", "cql", "iql"):
    off = load_preset(f"pendulum_{algo}")
    off.seed = 1
    off.train.dataset = str(data / "replay")
    off.policy.hidden_sizes = [64, 64]
    off.train.iterations, off.train.updates_per_iteration = 6, 250
    off.train.eval_interval, off.train.eval_episodes = 2, 5
    off.log.progress = False
    if algo == "iql":
        off.policy.optim.lr = off.policy.q_lr = 1e-3  # a short run: larger steps than the paper's 3e-4
    run = lab.build(off, name=algo)
    history = run.run()
    curves[algo] = [(m["gradient_steps"], m["eval_normalized_score"]) for m in history if "eval_normalized_score" in m]
    run.close()
    print(f"{algo:4s} normalised score after {history[-1]['gradient_steps']} gradient steps: {curves[algo][-1][1]:6.1f}")

# %%
# NBVAL_CHECK_OUTPUT
print({algo: [steps for steps, _ in curve] for algo, curve in curves.items()})  # the evaluations' gradient steps

# %% [markdown]
# ## 4. One chart
#
# Left: each algorithm's normalised score over its gradient steps; right: the final scores beside
# the datasets' own mean returns (normalised the same way).

# %%
fig, (left, right) = plt.subplots(1, 2, figsize=(11, 3.8))
for algo, points in curves.items():
    left.plot(*zip(*points), marker="o", label=algo.upper())
left.axhline(replay_info.normalized_score(replay_info.return_mean), color="gray", ls="--", label="replay data")
left.set(xlabel="gradient steps", ylabel="normalised score", title="offline learning on the replay dataset")
left.legend()
names = [a.upper() for a in curves] + ["medium data", "expert data", "replay data"]
values = [points[-1][1] for points in curves.values()] + [
    info.normalized_score(info.return_mean) for info in (medium_info, expert_info, replay_info)
]
right.bar(names, values, color=["C0", "C1", "C2", "0.6", "0.6", "0.6"])
right.set(ylabel="normalised score", title="final scores and the datasets")
fig.tight_layout()

# %% [markdown]
# What the numbers say, at these budgets: the "medium" checkpoint (1,600 env steps) is no better than
# random, the replay dataset is mostly such early episodes, and 1,500 gradient steps of small networks
# are an early point on the offline learners' curves. They show the workflow end to end; for a
# comparison, run the `pendulum_*` presets (20,000 gradient steps, the papers' networks) on a dataset of
# a longer SAC run, and several seeds (notebook 07's `lab.seeds`).

# %%
lab.shutdown()
