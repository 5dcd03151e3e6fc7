"""The pixel PPO floor: the same PPO iteration as the `pixelppo` item written as one plain torch loop.

The shape of CleanRL's Atari PPO (``ppo_atari.py``), in our own words: one
``SyncVectorEnv`` of 8 synthetic pixel envs (`benchmarks.pixel_env`), rollout
tensors preallocated for 128 steps, one network (the Nature CNN, frames scaled
by 255 inside, a 512-unit ReLU layer shared by a 6-way policy head and a value
head), acting under ``torch.no_grad``, GAE in a backward loop over the
rollout, then 4 epochs of 4 shuffled minibatches of 256 (clipped surrogate,
value loss, entropy bonus, gradient norm clipped at 0.5, Adam lr 2.5e-4, eps
1e-5). No framework, no storage layer, no copies of the policy, no checks:
what the same work costs with nothing around it. The settings come from
`pixelppo_common` (every side reads them).

A repeat: env steps per second of whole iterations (sampling, then learning)
over a window, after one warm-up iteration, as every side of the item.
"""

from __future__ import annotations

import _common as c

c.repo_root_on_path()
c.set_threads()

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import pixelppo_common as pc  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from benchmarks.pixel_env import SHAPE, register  # noqa: E402

ACTIONS = 6


class Net(nn.Module):
    """Nature CNN trunk on channels-last uint8 frames, a shared 512-unit layer, policy and value heads."""

    def __init__(self) -> None:
        super().__init__()
        channels = SHAPE[-1]
        self.trunk = nn.Sequential(
            nn.Conv2d(channels, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, 512),
            nn.ReLU(),
        )
        self.pi = nn.Linear(512, ACTIONS)
        self.v = nn.Linear(512, 1)
        for layer in self.trunk:
            if isinstance(layer, (nn.Conv2d, nn.Linear)):
                nn.init.orthogonal_(layer.weight, np.sqrt(2))
                nn.init.zeros_(layer.bias)
        nn.init.orthogonal_(self.pi.weight, 0.01)
        nn.init.zeros_(self.pi.bias)
        nn.init.orthogonal_(self.v.weight, 1.0)
        nn.init.zeros_(self.v.bias)

    def features(self, frames: torch.Tensor) -> torch.Tensor:
        return self.trunk(frames.permute(0, 3, 1, 2).float() / 255.0)

    def value(self, frames: torch.Tensor) -> torch.Tensor:
        return self.v(self.features(frames)).squeeze(-1)

    def evaluate(self, frames: torch.Tensor, action: torch.Tensor = None):
        """(action, log-probability, entropy, value); a new action is drawn when ``action`` is None."""
        h = self.features(frames)
        dist = torch.distributions.Categorical(logits=self.pi(h))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.v(h).squeeze(-1)


class Floor:
    """One PPO learner and its vector env; ``iteration()`` collects one rollout and trains on it."""

    def __init__(self, seed: int) -> None:
        torch.manual_seed(seed)
        self.env = gym.make_vec(register(), num_envs=pc.NUM_ENVS, vectorization_mode="sync")
        self.net = Net()
        self.opt = torch.optim.Adam(self.net.parameters(), lr=pc.LR, eps=1e-5)
        t, n = pc.ROLLOUT, pc.NUM_ENVS
        self.obs = torch.zeros((t, n, *SHAPE), dtype=torch.uint8)
        self.actions = torch.zeros((t, n), dtype=torch.long)
        self.logp = torch.zeros((t, n))
        self.rewards = torch.zeros((t, n))
        self.dones = torch.zeros((t, n))
        self.values = torch.zeros((t, n))
        first, _ = self.env.reset(seed=seed)
        self.next_obs = torch.as_tensor(first)
        self.next_done = torch.zeros(n)
        self.env_steps = 0

    def collect(self) -> None:
        for step in range(pc.ROLLOUT):
            self.obs[step] = self.next_obs
            self.dones[step] = self.next_done
            with torch.no_grad():
                action, logp, _, value = self.net.evaluate(self.next_obs)
            self.actions[step], self.logp[step], self.values[step] = action, logp, value
            frames, reward, term, trunc, _ = self.env.step(action.numpy())
            self.rewards[step] = torch.as_tensor(reward, dtype=torch.float32)
            self.next_obs = torch.as_tensor(frames)
            self.next_done = torch.as_tensor(np.logical_or(term, trunc), dtype=torch.float32)

    def advantages(self):
        with torch.no_grad():
            next_value = self.net.value(self.next_obs)
        adv = torch.zeros_like(self.rewards)
        running = torch.zeros(pc.NUM_ENVS)
        for step in reversed(range(pc.ROLLOUT)):
            if step == pc.ROLLOUT - 1:
                alive, bootstrap = 1.0 - self.next_done, next_value
            else:
                alive, bootstrap = 1.0 - self.dones[step + 1], self.values[step + 1]
            delta = self.rewards[step] + pc.GAMMA * bootstrap * alive - self.values[step]
            running = delta + pc.GAMMA * pc.GAE_LAMBDA * alive * running
            adv[step] = running
        return adv, adv + self.values

    def learn(self, adv: torch.Tensor, returns: torch.Tensor) -> None:
        obs = self.obs.reshape(-1, *SHAPE)
        actions, old_logp = self.actions.reshape(-1), self.logp.reshape(-1)
        adv, returns, old_values = adv.reshape(-1), returns.reshape(-1), self.values.reshape(-1)
        for _ in range(pc.EPOCHS):
            order = torch.randperm(pc.BATCH)
            for start in range(0, pc.BATCH, pc.MINIBATCH):
                idx = order[start : start + pc.MINIBATCH]
                _, logp, entropy, value = self.net.evaluate(obs[idx], actions[idx])
                ratio = (logp - old_logp[idx]).exp()
                a = adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                surrogate = torch.max(-a * ratio, -a * ratio.clamp(1 - pc.CLIP, 1 + pc.CLIP)).mean()
                clipped = old_values[idx] + (value - old_values[idx]).clamp(-pc.CLIP, pc.CLIP)
                v_loss = 0.5 * torch.max((value - returns[idx]) ** 2, (clipped - returns[idx]) ** 2).mean()
                loss = surrogate - pc.ENT * entropy.mean() + pc.VF * v_loss
                self.opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.net.parameters(), pc.MAX_GRAD_NORM)
                self.opt.step()

    def iteration(self) -> int:
        self.collect()
        self.learn(*self.advantages())
        self.env_steps += pc.BATCH
        return pc.BATCH


def main() -> None:
    a = c.args()
    floor = Floor(a.seed)
    c.begin(pc.CASE)
    rates = c.timed_rate(floor.iteration, a.seconds, a.repeats)
    c.result(pc.CASE, rates, "env steps/s", env_steps=floor.env_steps)
    floor.env.close()


if __name__ == "__main__":
    main()
