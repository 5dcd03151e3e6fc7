# %% [markdown]
# # 02 · The data buffer: storage modes and units, sharding, the episode table, a DataLoader
#
# Every transition an env worker produces goes into the **data buffer**, and every batch a train
# worker learns from comes out of it. This notebook opens it up:
#
# 1. a single `Storage` shard: **modes** (`circular`, `standard`) and **units** (`transition`,
#    `episode`);
# 2. a **sharded** `DataBuffer` whose shards are Ray actors, fed by env workers, and its
#    **EpisodeTable**: which env writes to which shard, which train worker reads which shard;
# 3. a read-only **BufferView** of the stored data, handed to a torch `DataLoader` to train a small
#    model on it.
#
# It needs no training run and takes about a minute.

# %%
import numpy as np
import torch
from gymnasium import spaces

from rlightning.buffer.utils import Storage, StorageFullError
from rlightning.notebook import Lab
from rlightning.types import BatchedData, EnvMeta, PolicyResponse
from rlightning.utils.config import BufferConfig, EnvConfig
from rlightning.widgets import BufferViewWidget, EpisodeTableWidget

torch.manual_seed(0)
lab = Lab.local(num_cpus=4, log_to_driver=False)
lab

# %% [markdown]
# ## 1. One storage shard
#
# A `Storage` is a plain Python class: it works in this process, and the buffer launches the same
# class as a Ray actor when the shards are remote. It preallocates its tensors from the env's
# spaces (the `EnvMeta`) and writes in place. To look at it without an environment we feed it
# hand-made episodes with `add_episode`: arrays shaped `[T, num_envs, ...]`, where `obs` may hold
# one extra step (the final observation).

# %%
meta = EnvMeta("toy-0", spaces.Discrete(2), spaces.Box(-1.0, 1.0, (3,), np.float32), 1)
rng = np.random.default_rng(0)


def make_episode(length: int) -> dict:
    """One episode of `length` steps for one sub-env, reward 1 per step (no `terminated`: it ends truncated)."""
    return {
        "obs": rng.uniform(-1, 1, (length + 1, 1, 3)).astype(np.float32),
        "action": rng.integers(0, 2, (length, 1)),
        "reward": np.ones((length, 1), dtype=np.float32),
    }


def shapes(td) -> dict:
    """Key -> shape of a TensorDict, for printing."""
    return {key: tuple(value.shape) for key, value in sorted(td.items())}


# %% [markdown]
# ### Mode `circular`, unit `transition`
#
# The default of a replay buffer: `capacity` counts transitions, and once full the oldest ones are
# overwritten. Two episodes of 6 steps into 10 slots: the second overwrites two transitions of the
# first, so only one *whole* episode is left. Sampling draws transitions uniformly.

# %%
# NBVAL_CHECK_OUTPUT
circular = Storage(capacity=10, mode="circular", unit="transition", env_meta_list=[meta], seed=0)
for _ in range(2):
    circular.add_episode(make_episode(6), env_id="toy-0")
    print(f"size {circular.size}/10, whole episodes stored: {circular.stats()['episodes']}")
print(shapes(circular.sample(4)))

# %% [markdown]
# ### Mode `standard`
#
# A `standard` storage never overwrites: when the data does not fit, the add raises
# `StorageFullError` and **nothing** of it is stored. Useful when losing data would be a bug.

# %%
# NBVAL_CHECK_OUTPUT
standard = Storage(capacity=10, mode="standard", unit="transition", env_meta_list=[meta])
standard.add_episode(make_episode(6), env_id="toy-0")
try:
    standard.add_episode(make_episode(6), env_id="toy-0")
except StorageFullError as err:
    print(err)
print("size after the failed add:", standard.size)

# %% [markdown]
# ### Unit `episode`
#
# With `unit="episode"` a slot holds a whole episode, and a sample is a batch of episodes
# `[batch, time]`, padded to the longest one with a `mask` that marks the real steps. With
# `slice_len` the sampler cuts fixed-length windows instead (what recurrent policies train on).

# %%
# NBVAL_CHECK_OUTPUT
episodes = Storage(capacity=3, mode="circular", unit="episode", env_meta_list=[meta], seed=0)
for length in (3, 5, 4, 2):
    episodes.add_episode(make_episode(length), env_id="toy-0")
print("episodes stored:", episodes.size, "of 4 added; transitions:", episodes.stats()["transitions"])
batch = episodes.sample(2)
print("batch:", tuple(batch.batch_size), "real steps per sampled episode:", batch["mask"].sum(-1).tolist())
print(shapes(batch))

sliced = Storage(capacity=3, mode="circular", unit="episode", env_meta_list=[meta], seed=0, slice_len=2)
for length in (3, 5, 4, 2):
    sliced.add_episode(make_episode(length), env_id="toy-0")
print("slices:", tuple(sliced.sample(3).batch_size))

# %% [markdown]
# ## 2. A sharded buffer fed by env workers
#
# Now the real thing. Four CartPole env workers (Ray actors, 2 sub-envs each) and a replay
# `DataBuffer` with **two shards**, also Ray actors (`remote=True`; in a full config this is
# `cluster.remote_storage` and `cluster.buffer_worker_num`). Sharding spreads the
# writes and the memory over processes or nodes; each env worker always writes to the same shard,
# so its episodes stay whole.

# %%
env_group = lab.env_group(EnvConfig(name="CartPole-v1", num_workers=4, num_envs=2, num_cpus=0.5))
buffer = lab.data_buffer(BufferConfig(type="replay", capacity=500, seed=0), remote=True)
buffer.init(env_group.env_metas, num_storages=2, num_train_workers=2, storage_options={"num_cpus": 0.25})
buffer

# %% [markdown]
# ### The episode table
#
# The buffer's `EpisodeTable` decides the routing: an env goes to the least-loaded shard (ties in
# turn), and train workers are spread over the shards in even blocks. Here each shard gets two env
# workers and feeds one train worker. The widget below shows the same table; it updates when new
# envs register.

# %%
# NBVAL_CHECK_OUTPUT
table = buffer.episode_table
for env_id, shard in table.get_env_to_storage().items():
    print(f"{env_id} -> shard {shard}")
for shard, workers in table.get_storage_to_train_workers().items():
    print(f"shard {shard} -> train workers {workers}")

# %%
EpisodeTableWidget(buffer)

# %% [markdown]
# ### Collecting
#
# The data flow of one step, written out by hand (the engine does exactly this): the env group
# returns one `EnvRet` per worker, a policy answers each with a `PolicyResponse` (here: random
# actions), and `add_batched_transition` pairs them and sends each shard its part in **one call
# per shard**. A transition is stored once its episode ends (so that postprocessing such as GAE
# sees the whole episode).

# %%
# NBVAL_CHECK_OUTPUT
actions = np.random.default_rng(0)
env_rets = env_group.reset(seed=0)
for _ in range(60):
    responses = BatchedData(
        list(env_rets.ids()),
        [PolicyResponse(env_id, action=actions.integers(0, 2, ret.observation.shape[0])) for env_id, ret in env_rets.items()],
    )
    buffer.add_batched_transition(env_rets, responses)
    env_rets = env_group.step(responses)

stats = buffer.stats()
for shard, info in enumerate(stats["shards"]):
    print(f"shard {shard}: {info['size']} transitions stored, {info['episodes']} whole episodes")
print("total:", stats["size"])

# %% [markdown]
# `BufferViewWidget` is the live view of the buffer: fill per shard, recent episodes and a few
# stored rows, and how many transitions were written in all. (The run dashboard of notebook 01
# contains it; there the rollout buffer is emptied by every training sample, so between iterations
# it stores 0 and the written count is the number that climbs.)

# %%
BufferViewWidget(buffer)

# %% [markdown]
# ### Sampling
#
# `sample(batch_size)` returns **one batch per train worker**, each drawn from the shards that feed
# that worker. With data-parallel training every worker gets its own batch without a central copy.

# %%
# NBVAL_CHECK_OUTPUT
batches = buffer.sample(32)
print(len(batches), "batches:", [tuple(b.batch_size) for b in batches])
print(shapes(batches[0]))

# %% [markdown]
# ## 3. A BufferView into a DataLoader
#
# `buffer.view()` copies everything stored into a read-only `BufferView`. It indexes and slices
# like a TensorDict, iterates in mini-batches, and turns into a torch `Dataset` or `DataLoader`:
# the way to use RL data for supervised learning (world models, behaviour cloning, probes).

# %%
# NBVAL_CHECK_OUTPUT
view = buffer.view()
print(view)
try:
    view["reward"] = torch.zeros(len(view))
except TypeError as err:
    print(err)

# %% [markdown]
# As an example, fit a small dynamics model `(obs, action) -> next_obs` on the stored CartPole
# transitions. The `DataLoader` yields TensorDict mini-batches (one gather per batch).

# %%
loader = view.dataloader(batch_size=64, shuffle=True)
model = torch.nn.Sequential(torch.nn.Linear(4 + 2, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))  # obs + one-hot action
optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)


def model_input(batch) -> torch.Tensor:
    one_hot = torch.nn.functional.one_hot(batch["action"].long(), 2).float()
    return torch.cat([batch["obs"], one_hot], dim=-1)


losses = []
for epoch in range(20):
    total = 0.0
    for batch in loader:
        loss = torch.nn.functional.mse_loss(model(model_input(batch)), batch["next_obs"])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    losses.append(total / len(view))
print(f"mean squared error: epoch 1 {losses[0]:.4f}, epoch {len(losses)} {losses[-1]:.4f}")

# %%
# NBVAL_CHECK_OUTPUT
first = next(iter(loader))
print(type(first).__name__, tuple(first.batch_size), "batches per epoch:", len(loader))
print("the model learned:", losses[-1] < losses[0] / 2)

# %% [markdown]
# ## Shut down
#
# The Lab stops the env workers and the storage actors it started, then Ray.

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
