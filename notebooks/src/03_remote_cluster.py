# %% [markdown]
# # 03 · Connect to a cluster and attach GPU policy groups
#
# Notebooks 01 and 02 started Ray inside the notebook. On a real cluster Ray is already running:
# you start it once with `ray start --head` on the head node (and `ray start --address=...` on the
# others), and every notebook **joins** it with `Lab.connect`. This notebook:
#
# 1. starts a small stand-in cluster (one head node on this machine) so that it runs anywhere;
# 2. joins it with `Lab.connect`, with the cluster's auth token;
# 3. attaches a **policy group** on its own, on GPUs when the cluster has them, on CPUs otherwise;
# 4. trains a few iterations on the cluster;
# 5. leaves: the Lab stops what *it* started, and the cluster keeps running until we stop it.
#
# On your own cluster skip step 1 and use its address (`ray status` on the head prints it).

# %% [markdown]
# ## 1. A stand-in cluster
#
# We start `ray start --head --block` as a child process in **its own process group**, so that at
# the end we can stop exactly this cluster (never run `ray stop`: it stops every Ray on the
# machine). It runs on this machine (`--node-ip-address=127.0.0.1`), on a free port, with 2 CPUs
# and no dashboard; a real head uses an address its worker nodes can reach. `--block` keeps the
# command in the foreground; it prints a line containing "block forever" once the node is up. On a
# very busy machine a node can miss Ray's fixed startup window, so we try up to three times.

# %%
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_head(proc: subprocess.Popen) -> None:
    """Stop the head's whole process group (and nothing else).

    The raylet and workers end within a second of SIGTERM; Ray's GCS server lingers about 30 s
    before it exits, so whatever is left after 5 s is killed.
    """
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def start_head(port: int, num_cpus: int = 2, attempts: int = 3) -> subprocess.Popen:
    """Run `ray start --head --block` in its own process group; return the process once the node is up."""
    ray_cli = str(Path(sys.executable).with_name("ray"))
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.setdefault("RAY_agent_register_timeout_ms", "120000")  # let the node's agents start slowly on a busy machine
    for attempt in range(1, attempts + 1):
        log = Path(tempfile.mkdtemp(prefix="rlightning-head-")) / "head.log"
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [ray_cli, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}", f"--num-cpus={num_cpus}",
                 "--include-dashboard=false", "--disable-usage-stats", "--block"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        deadline = time.time() + 180
        while "block forever" not in log.read_text():
            if proc.poll() is not None or time.time() > deadline:
                break
            time.sleep(0.5)
        else:
            return proc
        stop_head(proc)
        print(f"attempt {attempt}: the head did not start:", log.read_text().strip().splitlines()[-1:])
    raise RuntimeError(f"ray start --head failed {attempts} times; see {log}")


port = free_port()
head = start_head(port)
address = f"127.0.0.1:{port}"
print("head is up")

# %% [markdown]
# ## 2. Join it
#
# Clusters started with `ray start` require **token authentication**: `ray start --head` writes
# the token to `~/.ray/auth_token` on the head node (`ray get-auth-token` prints it). Pass the file
# with `token_file=...` or the token itself with `token=...`. Without it the connection is refused
# with an error that says so; if nothing answers at the address, `Lab.connect` says that within
# `timeout_s` instead of hanging.

# %%
# NBVAL_CHECK_OUTPUT
from rlightning.notebook import ClusterConnectionError, Lab

nowhere = f"127.0.0.1:{free_port()}"  # a port where nothing listens
try:
    Lab.connect(nowhere, timeout_s=2)
except ClusterConnectionError as err:
    print(type(err).__name__ + ":", str(err).split(";")[0].replace(nowhere, "<address>"))

# %%
lab = Lab.connect(address, token_file="~/.ray/auth_token")
lab

# %% [markdown]
# `cluster_info()` is a plain dict: nodes, CPUs and GPUs (total and free), and what this Lab
# started.

# %%
info = lab.cluster_info()
info

# %%
# NBVAL_CHECK_OUTPUT
print(f"{info['nodes']} node(s), {info['cpus']:g} CPUs")
gpus = info["gpus"]

# %% [markdown]
# ## 3. A GPU policy group, or a CPU one
#
# `lab.policy_group(policy_cfg, gpus=...)` builds a `PolicyGroup` on its own: train workers
# (data-parallel over NCCL when they have GPUs, gloo otherwise) and eval workers that serve
# actions. `gpus` is the GPUs per worker: fractions share a GPU. Asking for more than the cluster
# has fails at once, before any actor starts, with a message that names the numbers:

# %%
# NBVAL_CHECK_OUTPUT
from rlightning.utils.config import apply_overrides, load_preset

cfg = load_preset("cartpole_ppo")
try:
    lab.policy_group(cfg.policy, gpus=gpus + 1)
except ValueError as err:
    print(err)

# %% [markdown]
# So we ask for what is there: half a GPU per worker (train and eval share one GPU) where the
# cluster has GPUs, and CPU workers otherwise. The group launches its workers as Ray actors on the
# cluster. Its networks are built once the env's spaces are known (`construct_network`); then
# `stats()` shows where each worker runs and on which device.

# %%
import gymnasium as gym

from rlightning.types import EnvMeta
from rlightning.utils.config import ClusterConfig

placement = ClusterConfig(train_each_cpu_num=0.25, eval_each_cpu_num=0.25)
policy_group = lab.policy_group(cfg.policy, placement, gpus=0.5 if gpus >= 1 else 0.0)
probe = gym.make("CartPole-v1")
policy_group.construct_network(EnvMeta("CartPole-v1-0", probe.action_space, probe.observation_space, 1))
stats = policy_group.stats()
for worker in stats["train_workers"] + stats["eval_workers"]:
    print(f"{worker['role']:5s} worker {worker['worker_index']}: node {worker['node_ip']}, "
          f"device {worker['device']}, GPUs {worker['gpu_ids']}, pid {worker['pid']}")

# %% [markdown]
# A group built on its own is handy to try a network or a weight-sync strategy on the cluster's
# hardware. For training, `lab.build` builds the whole run with the same placement logic, so we
# close this one to free its resources.

# %%
policy_group.close()

# %% [markdown]
# ## 4. Train on the cluster
#
# Every worker of this config runs as a Ray actor on the cluster (`remote_env`, `remote_eval`,
# `remote_train`), each asking for a fraction of a CPU so that the small 2-CPU head fits them all.
# With GPUs, `cluster.train_each_gpu_num` and `cluster.eval_each_gpu_num` put the policies on them,
# and `cluster.inference=eval_workers` has the eval worker answer every env step (the preset's
# `env_workers` would act with CPU copies of the policy inside the env workers).

# %%
cfg = apply_overrides(
    load_preset("cartpole_ppo"),
    [
        "seed=3",
        "env.num_workers=2", "env.num_envs=4", "env.num_cpus=0.25",
        "train.rollout_steps=64", "train.iterations=4",
        "cluster.remote_env=true", "cluster.remote_eval=true", "cluster.remote_train=true",
        "cluster.inference=eval_workers",
        "cluster.train_each_cpu_num=0.25", "cluster.eval_each_cpu_num=0.25",
        f"cluster.train_each_gpu_num={0.5 if gpus >= 1 else 0}",
        f"cluster.eval_each_gpu_num={0.5 if gpus >= 1 else 0}",
        "log.jsonl=false",
    ],
)
cfg.log.run_dir = tempfile.mkdtemp(prefix="rlightning-cluster-")
run = lab.build(cfg)
history = run.run()
print(f"{len(history)} iterations, {run.engine.env_steps} env steps, mean return {history[-1]['episode_return_mean']:.1f}")

# %%
# NBVAL_CHECK_OUTPUT
print(run)
print(sorted(lab.cluster_info()["runs"]))

# %% [markdown]
# ## 5. Leave the cluster
#
# `lab.shutdown()` stops the actors this Lab started and disconnects; it does **not** stop the
# cluster, which other notebooks may be using. Then we stop our stand-in head by killing its
# process group (on a real cluster you would leave it running).

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)

stop_head(head)
print("head stopped")
