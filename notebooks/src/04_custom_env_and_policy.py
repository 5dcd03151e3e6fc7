# %% [markdown]
# # 04 · Your own environment and your own policy
#
# rlightning's built-in pieces are ordinary registered classes, and yours are too. In this notebook
# we define, in cells:
#
# 1. a **gymnasium environment**, registered with `gymnasium.register`;
# 2. a **policy**: a small actor-critic (`BasePolicy` subclass), registered in `POLICIES`;
#
# and train the policy on the environment with env workers **and** policy workers running as Ray
# actors. Classes defined in a notebook cannot be imported by other processes; Ray ships them by
# value (cloudpickle), so nothing has to be put in a package first.

# %%
import tempfile

import gymnasium as gym
import matplotlib.pyplot as plt
import numpy as np
import torch
from pydantic import Field
from torch import nn

from rlightning.notebook import Lab
from rlightning.policy import BasePolicy
from rlightning.types import EnvMeta
from rlightning.utils.config import MainConfig, PolicyConfig
from rlightning.utils.registry import POLICIES

lab = Lab.local(num_cpus=4, log_to_driver=False)
lab

# %% [markdown]
# ## 1. An environment
#
# `Corridor` is a corridor of `length` cells. The agent starts at cell 0 and moves left (action 0)
# or right (action 1); reaching the last cell ends the episode with reward +1, every step costs
# 0.01. It observes its position scaled to [0, 1]. A random walker often gets lost; the best
# policy walks straight to the end in 7 steps (return 1 - 6 x 0.01 = 0.94).
#
# Registering under an id makes it usable in a config by name; re-registering (re-running this
# cell) replaces the old entry. `max_episode_steps` truncates wandering episodes.

# %%
class Corridor(gym.Env):
    """Walk to the end of a corridor: reward 1 at the end, -0.01 per step."""

    def __init__(self, length: int = 8):
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.position = 0

    def _obs(self):
        return np.array([self.position / (self.length - 1)], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.position = 0
        return self._obs(), {}

    def step(self, action):
        self.position = min(max(self.position + (1 if int(action) == 1 else -1), 0), self.length - 1)
        reached = self.position == self.length - 1
        reward = 1.0 if reached else -0.01
        return self._obs(), reward, reached, False, {}


if "Corridor-v0" in gym.registry:
    del gym.registry["Corridor-v0"]
gym.register(id="Corridor-v0", entry_point=Corridor, max_episode_steps=32, kwargs={"length": 8})

# %% [markdown]
# A quick check in this process, as gymnasium sees it: walking right reaches the end in 7 steps.

# %%
# NBVAL_CHECK_OUTPUT
env = gym.make("Corridor-v0")
obs, _ = env.reset(seed=0)
total, steps, done = 0.0, 0, False
while not done:
    obs, reward, terminated, truncated, _ = env.step(1)
    total, steps, done = total + reward, steps + 1, terminated or truncated
print(f"always right: {steps} steps, return {total:.2f}, final observation {obs.tolist()}")

# %% [markdown]
# ## 2. A policy
#
# A policy worker implements a handful of methods (see `BasePolicy`):
#
# - `construct_network(env_meta)`: build the torch modules for the env's spaces and
#   `register_module` them (weight sync and checkpoints find them there);
# - `compute_actions(obs, deterministic)`: actions for a batch of observations `[B, ...]`, plus
#   any extras the learner needs, as numpy arrays with leading dim `B`;
# - `train()`: learn from `self.dataset` (the TensorDict the buffer sampled) and return float
#   metrics;
# - optionally the classmethod `buffer_postprocess_fn`: what the buffer computes for every finished
#   episode segment. We ask for GAE, so each stored transition carries `advantage` and `return`.
#
# This one is a plain advantage actor-critic (A2C): one gradient step per iteration on the whole
# rollout. It uses the GAE advantages as they come: normalising them per batch (as PPO does) turns
# the noise of a rollout in which no walker reached the end into a full-size gradient step, and
# with one step per iteration that can push the policy into always walking left for good.
# `POLICIES.register(..., override=True)` makes re-running the cell safe.
#
# Its hyperparameters get their own config class: a `PolicyConfig` subclass adds the algorithm's
# fields to the shared ones (`hidden_sizes`, `activation`, `optim`, `gamma`, weight sync, ...), each
# with a default and a docstring. The policy names it in `config_cls` (or pass
# `POLICIES.register(..., config=A2CConfig)`); then `policy.type: corridor_a2c` in a config builds an
# `A2CConfig`, and a key it does not have is rejected with the closest valid name.

# %%
class A2CConfig(PolicyConfig):
    """A2C's settings on top of the shared policy config."""

    gae_lambda: float = Field(0.95, ge=0, le=1)
    """GAE lambda of the advantages the buffer computes."""
    ent_coef: float = Field(0.01, ge=0)
    """Entropy bonus coefficient."""
    vf_coef: float = Field(0.5, ge=0)
    """Value loss coefficient."""


@POLICIES.register("corridor_a2c", override=True)
class CorridorA2C(BasePolicy):
    """Advantage actor-critic with small MLPs; advantages from the buffer's GAE."""

    config_cls = A2CConfig

    @classmethod
    def buffer_postprocess_fn(cls, policy_cfg):
        from rlightning.buffer.utils.utils import make_gae_postprocess_fn

        return make_gae_postprocess_fn(policy_cfg.gamma, policy_cfg.gae_lambda)

    def construct_network(self, env_meta: EnvMeta) -> None:
        self.env_meta = env_meta
        obs_dim = int(np.prod(env_meta.observation_space.shape))
        n_actions = int(env_meta.action_space.n)
        hidden = self.config.hidden_sizes[0]
        self.actor = self.register_module("actor", nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, n_actions)))
        self.critic = self.register_module("critic", nn.Sequential(nn.Linear(obs_dim, hidden), nn.Tanh(), nn.Linear(hidden, 1)))

    @torch.no_grad()
    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> dict:
        x = torch.as_tensor(obs, dtype=torch.float32)
        dist = torch.distributions.Categorical(logits=self.actor(x))
        action = dist.probs.argmax(-1) if deterministic else dist.sample()
        return {"action": action.numpy().astype(np.int64), "value": self.critic(x).squeeze(-1).numpy()}

    def train(self) -> dict:
        data = self.dataset
        obs, action = data["obs"].float(), data["action"].long().reshape(-1)
        advantage, ret = data["advantage"].reshape(-1), data["return"].reshape(-1)
        dist = torch.distributions.Categorical(logits=self.actor(obs))
        policy_loss = -(dist.log_prob(action) * advantage).mean()
        value_loss = (self.critic(obs).squeeze(-1) - ret).pow(2).mean()
        entropy = dist.entropy().mean()
        loss = policy_loss + self.config.vf_coef * value_loss - self.config.ent_coef * entropy
        optimizer = self.optimizers["main"]  # BasePolicy.setup_optimizer made it from config.policy.optim
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        self.update_count += 1
        return {"policy_loss": policy_loss.item(), "value_loss": value_loss.item(), "entropy": entropy.item()}

# %% [markdown]
# ## 3. A config that uses both
#
# `env.name` is the gymnasium id; `policy.type` the registered policy name. Env workers, the eval
# worker (computing actions during rollouts) and the train worker all run as Ray actors: the
# classes above travel to them by value. A rollout buffer hands each iteration's data to `train()`
# once and clears it (on-policy).

# %%
# NBVAL_CHECK_OUTPUT
cfg = MainConfig(
    seed=0,
    env={"name": "Corridor-v0", "num_workers": 2, "num_envs": 4, "num_cpus": 0.5},
    policy={"type": "corridor_a2c", "hidden_sizes": [32], "optim": {"lr": 0.01}, "gamma": 0.99, "gae_lambda": 0.95},
    buffer={"type": "rollout", "capacity": 2048, "sampler": "all"},
    train={"iterations": 40, "rollout_steps": 64},
    cluster={"remote_env": True, "remote_eval": True, "remote_train": True,
             "eval_each_cpu_num": 0.5, "train_each_cpu_num": 0.5},
    log={"run_dir": tempfile.mkdtemp(prefix="rlightning-custom-"), "jsonl": False},
)
print(cfg.env.name, "x", cfg.env.num_workers * cfg.env.num_envs, "sub-envs;", "policy", cfg.policy.type)
print(type(cfg.policy).__name__, "gae_lambda", cfg.policy.gae_lambda, "ent_coef", cfg.policy.ent_coef)

# %%
run = lab.build(cfg)
run

# %% [markdown]
# ## 4. Train
#
# `progress=False` turns the progress bar off; the metrics are what `train()` returned, plus the
# engine's own (env steps, episode returns, timings).

# %%
history = run.run(progress=False)
returns = [m.get("episode_return_mean", float("nan")) for m in history]
print(f"mean return: first iteration {returns[0]:.2f}, last {returns[-1]:.2f}")

# %%
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot([m["iteration"] for m in history], returns)
ax.set_xlabel("iteration")
ax.set_ylabel("mean episode return")
ax.set_title("A2C on Corridor-v0 (Ray workers)")
plt.show()

# %% [markdown]
# With deterministic actions the trained policy walks straight to the end. Forty iterations of
# one gradient step each were enough for every seed we tried (seeds 0-7 with these Ray workers,
# 0-11 with in-process ones). Learning is not bit-for-bit
# reproducible with Ray actors answering each step, so this cell's output is shown, not checked.

# %%
result = run.engine.evaluate(num_episodes=4)
print(f"evaluation: mean length {result['length_mean']:.0f} steps, learned to walk right: {result['return_mean'] > 0.9}")

# %% [markdown]
# The workers really ran elsewhere: the policy and env classes were shipped to the Ray actors.

# %%
# NBVAL_CHECK_OUTPUT
import os

placement = run.policy_group.stats()
print("train worker in this process:", placement["train_workers"][0]["pid"] == os.getpid())
print("env workers remote:", run.env_group.is_remote)

# %%
# NBVAL_CHECK_OUTPUT
lab.shutdown()
print(lab)
