"""Off-policy presets against their floor: the engine's iterations beside a plain torch + gymnasium loop.

For each preset, in one process and interleaved in rounds: (a) ``engine.step()`` of ``build_run(cfg).engine``
(the preset as it is, one torch thread, logging off) and (b) the *floor*: a plain loop doing the same work per
iteration (the same env, network sizes and init family, batch, updates per iteration, optimizers and loss
terms, with a plain numpy replay array), as a CleanRL-style script would write it. Both sides first run until
they train (``learning_starts``, a stored episode, TD3's uniform steps), then alternate windows of
``--iters`` iterations. It prints each side's median ms per iteration and the median of the per-round ratios
(ours / floor): what the engine, buffer, acting path and bookkeeping cost above the arithmetic.

    python benchmarks/offpolicy_floor.py              # the four presets, 7 rounds each
    python benchmarks/offpolicy_floor.py --presets acrobot_dqn --rounds 9
    python benchmarks/offpolicy_floor.py --presets pendulum_td3 --iters 1 --rounds 5
    python benchmarks/offpolicy_floor.py --presets acrobot_dqn --warm 3000 --clock cpu  # at the final epsilon
    python benchmarks/offpolicy_floor.py --presets mountaincar_sac --set policy.fused_optimizer=true

What each floor does per iteration (the preset's settings):

- ``dqn`` (acrobot_dqn): ``rollout_steps`` env steps, each epsilon-greedy (linear decay; the greedy forward
  on one row only when the row does not explore, as SB3 and the preset's DQN do); the hard target copy every
  ``target_update_interval`` env steps; one sample of
  ``updates x batch`` rows, the target network's forward on all of them at once, then per update the online
  forward, smooth L1, ``zero_grad``, backward, ``clip_grad_norm_`` (``max_grad_norm``) and a fused Adam step.
- ``sac`` (mountaincar_sac: gSDE, fixed alpha; pendulum_sac: squashed Gaussian, autotuned alpha): acting
  forwards (gSDE: the exploration matrix drawn once per collection phase); per update the target (next actions
  with their log-probabilities, twin target critics), the twin critic MSE and its Adam step, the actor (and
  alpha) steps every ``policy_frequency`` updates (that many of them, as the preset's SAC does), the Polyak
  averaging of the critics; gSDE draws each training row's noise from its state's distribution
  (``sqrt(var(s)) * N(0, 1)``, as the preset's SAC does).
- ``td3`` (pendulum_td3): acting with Gaussian noise; per update the smoothed target, the twin critic step,
  and every ``policy_delay`` updates the actor step and the Polyak averaging of actor and critics.

Every floor runs its updates in the preset's arithmetic (``optim.flush_denormals``, ``optim.matmul_precision``,
through ``rlightning.policy.numerics.update_numerics``), as ours does.

The floor leaves out what the engine does on top (weight sync to the acting copy, metrics, episode
bookkeeping); those are part of what the ratio measures.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from rlightning.policy.numerics import update_numerics  # noqa: E402

PRESETS = ("acrobot_dqn", "mountaincar_sac", "pendulum_sac", "pendulum_td3")
#: Iterations per window, by preset (about a second each on one thread).
DEFAULT_ITERS = {"acrobot_dqn": 100, "mountaincar_sac": 8, "pendulum_sac": 8, "pendulum_td3": 1}


def _mlp(in_dim: int, hidden, out_dim: int, out_gain: float = 1.0) -> nn.Sequential:
    """ReLU MLP, orthogonal init (hidden gain sqrt(2), zero biases): the presets' init family."""
    layers: List[nn.Module] = []
    last = in_dim
    for width, gain in [(w, math.sqrt(2)) for w in hidden] + [(out_dim, out_gain)]:
        layer = nn.Linear(last, width)
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
        layers += [layer, nn.ReLU()]
        last = width
    return nn.Sequential(*layers[:-1])


class Replay:
    """Preallocated numpy arrays; one ``integers`` draw and one fancy index per key per sample."""

    def __init__(self, capacity: int, obs_dim: int, act_shape: tuple, act_dtype, seed: int = 0) -> None:
        self.cap, self.pos, self.size = capacity, 0, 0
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.action = np.zeros((capacity, *act_shape), act_dtype)
        self.reward = np.zeros(capacity, np.float32)
        self.term = np.zeros(capacity, np.float32)
        self.rng = np.random.default_rng(seed)

    def add(self, obs, action, reward, next_obs, term) -> None:
        """Rows ``[n, ...]`` (one per sub-env)."""
        for i in range(len(obs)):
            p = self.pos
            self.obs[p], self.action[p], self.reward[p] = obs[i], action[i], reward[i]
            self.next_obs[p], self.term[p] = next_obs[i], term[i]
            self.pos, self.size = (p + 1) % self.cap, min(self.size + 1, self.cap)

    def sample(self, n: int) -> Dict[str, torch.Tensor]:
        idx = self.rng.integers(0, self.size, n)
        keys = ("obs", "action", "reward", "next_obs", "term")
        return {k: torch.from_numpy(getattr(self, k)[idx]) for k in keys}


class Envs:
    """One env or a sync vector env, with autoreset by hand: ``step(actions)`` -> transition rows."""

    def __init__(self, name: str, num_envs: int, seed: int = 0) -> None:
        self.envs = [gym.make(name) for _ in range(num_envs)]
        self.obs = np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(self.envs)]).astype(np.float32)

    def step(self, actions: np.ndarray):
        prev = self.obs
        nxt, rew, term = np.empty_like(prev), np.empty(len(self.envs), np.float32), np.empty(len(self.envs), bool)
        cur = prev.copy()
        for i, env in enumerate(self.envs):
            o, r, te, tr, _ = env.step(actions[i])
            nxt[i], rew[i], term[i] = o, r, te
            cur[i] = env.reset()[0] if (te or tr) else o
        self.obs = cur
        return prev, rew, nxt, term


class DQNFloor:
    def __init__(self, cfg: Any) -> None:
        p, t = cfg.policy, cfg.train
        self.p, self.t = p, t
        self.envs = Envs(cfg.env.name, cfg.env.num_envs)
        space = self.envs.envs[0]
        obs_dim, n_act = space.observation_space.shape[0], space.action_space.n
        self.q = _mlp(obs_dim, p.hidden_sizes, n_act)
        self.target = copy.deepcopy(self.q).requires_grad_(False)
        self.params = list(self.q.parameters())
        self.opt = torch.optim.Adam(self.params, lr=p.q_lr or p.optim.lr, eps=p.optim.eps, fused=True)
        self.buf = Replay(cfg.buffer.capacity, obs_dim, (), np.int64)
        self.rng = np.random.default_rng(1)
        self.n_act, self.env_steps, self.marks = n_act, 0, -1

    def act(self, obs: np.ndarray) -> np.ndarray:
        p = self.p
        frac = min(1.0, self.env_steps / p.epsilon_decay_steps)
        eps = p.epsilon_start + frac * (p.epsilon_end - p.epsilon_start)
        explore = self.rng.random(len(obs)) < eps
        if explore.all():  # as SB3's predict: no forward for a random action
            a = np.zeros(len(obs), np.int64)
        else:
            with torch.no_grad():
                a = self.q(torch.from_numpy(obs)).argmax(-1).numpy()
        a[explore] = self.rng.integers(0, self.n_act, int(explore.sum()))
        return a

    def collect(self, steps: int) -> None:
        for _ in range(steps):
            a = self.act(self.envs.obs)
            obs, r, nxt, term = self.envs.step(a)
            self.buf.add(obs, a, r, nxt, term)
            self.env_steps += len(a)

    def ready(self) -> bool:
        return self.env_steps >= self.t.learning_starts and self.buf.size >= self.t.batch_size

    def step(self) -> None:
        p, t = self.p, self.t
        self.collect(t.rollout_steps)
        if not self.ready():
            return
        marks = self.env_steps // p.target_update_interval
        if marks > self.marks:
            self.target.load_state_dict(self.q.state_dict())
            self.marks = marks
        k, b = t.updates_per_iteration, t.batch_size
        s = self.buf.sample(k * b)
        with update_numerics(p.optim, "cpu"):  # the preset's flush_denormals and matmul_precision, as ours
            with torch.no_grad():
                target = s["reward"] + p.gamma * (1.0 - s["term"]) * self.target(s["next_obs"]).max(-1).values
            for i in range(k):
                sl = slice(i * b, (i + 1) * b)
                q = self.q(s["obs"][sl]).gather(1, s["action"][sl].unsqueeze(1)).squeeze(1)
                loss = F.smooth_l1_loss(q, target[sl])
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                nn.utils.clip_grad_norm_(self.params, p.optim.max_grad_norm)
                self.opt.step()


def _collect_then_update(floor: Any) -> None:
    """One iteration of an actor-critic floor: collect ``rollout_steps``, then ``updates_per_iteration``
    updates on one draw of ``updates_per_iteration x batch_size`` rows (as the engine's batched updates)."""
    t = floor.t
    floor.collect(t.rollout_steps)
    if not floor.ready():
        return
    k, b = t.updates_per_iteration, t.batch_size
    s = floor.buf.sample(k * b)
    with update_numerics(floor.p.optim, "cpu"):  # the preset's flush_denormals and matmul_precision, as ours
        for i in range(k):
            floor.update({key: v[i * b : (i + 1) * b] for key, v in s.items()})


class SACFloor:
    """SAC with twin critics; gSDE or a state-dependent Gaussian; fixed or autotuned alpha."""

    def __init__(self, cfg: Any) -> None:
        p, t = cfg.policy, cfg.train
        self.p, self.t = p, t
        self.envs = Envs(cfg.env.name, cfg.env.num_envs)
        space = self.envs.envs[0]
        obs_dim, act_dim = space.observation_space.shape[0], space.action_space.shape[0]
        low, high = space.action_space.low, space.action_space.high
        self.scale = torch.as_tensor((high - low) / 2.0, dtype=torch.float32)
        self.bias = torch.as_tensor((high + low) / 2.0, dtype=torch.float32)
        h = list(p.hidden_sizes)
        if p.use_sde:
            self.latent = _mlp(obs_dim, h[:-1], h[-1])
            self.latent.append(nn.ReLU())
            self.mu = _mlp(h[-1], [], act_dim, out_gain=0.01)
            self.log_std = nn.Parameter(torch.full((h[-1], act_dim), float(p.log_std_init)))
            actor_params = [*self.latent.parameters(), *self.mu.parameters(), self.log_std]
            self.w = None
        else:
            self.net = _mlp(obs_dim, h, 2 * act_dim, out_gain=0.01)
            actor_params = list(self.net.parameters())
        self.qs = [_mlp(obs_dim + act_dim, h, 1) for _ in range(2)]
        self.q_targets = [copy.deepcopy(q).requires_grad_(False) for q in self.qs]
        q_lr = p.q_lr or p.optim.lr
        fused = bool(getattr(p, "fused_optimizer", False))  # the preset's choice, as ours builds them
        self.actor_opt = torch.optim.Adam(actor_params, lr=p.optim.lr, eps=p.optim.eps, fused=fused)
        critic = [w for q in self.qs for w in q.parameters()]
        self.critic_opt = torch.optim.Adam(critic, lr=q_lr, eps=p.optim.eps, fused=fused)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(p.alpha)))
        alpha_opt = torch.optim.Adam([self.log_alpha], lr=q_lr, eps=p.optim.eps, fused=fused)
        self.alpha_opt = alpha_opt if p.autotune_alpha else None
        self.target_entropy = -float(act_dim)
        self.buf = Replay(cfg.buffer.capacity, obs_dim, (act_dim,), np.float32)
        self.env_steps, self.updates = 0, 0

    def policy(self, obs: torch.Tensor, w: Any = None):
        """(action in the Box, log-probability); gSDE: ``w`` the exploration matrix, None: each row's own draw."""
        if self.p.use_sde:
            latent = self.latent(obs)
            mean = self.mu(latent).clamp(-self.p.sde_mean_bound, self.p.sde_mean_bound)
            std = self.log_std.exp()
            theta = latent.detach()
            var = (theta**2) @ (std**2) + 1e-6
            u = mean + (var.sqrt() * torch.randn_like(mean) if w is None else theta @ w)
            gauss = -0.5 * (u - mean) ** 2 / var - 0.5 * torch.log(var) - 0.5 * math.log(2 * math.pi)
            y = torch.tanh(u)
            logp = (gauss - torch.log(self.scale * (1 - y**2) + 1e-6)).sum(-1)
            return y * self.scale + self.bias, logp
        mean, log_std = self.net(obs).chunk(2, dim=-1)
        log_std = -5.0 + 0.5 * 7.0 * (torch.tanh(log_std) + 1)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        y = torch.tanh(u)
        logp = (
            -0.5 * ((u - mean) / std) ** 2
            - log_std
            - 0.5 * math.log(2 * math.pi)
            - torch.log(self.scale * (1 - y**2) + 1e-6)
        ).sum(-1)
        return y * self.scale + self.bias, logp

    def collect(self, steps: int) -> None:
        if self.p.use_sde:  # one exploration matrix per acting row, drawn once per collection phase
            with torch.no_grad():
                std = self.log_std.exp()
                self.w = std * torch.randn(std.shape)
        for _ in range(steps):
            with torch.no_grad():
                obs = torch.from_numpy(self.envs.obs)
                if self.p.use_sde:
                    latent = self.latent(obs)
                    mean = self.mu(latent).clamp(-self.p.sde_mean_bound, self.p.sde_mean_bound)
                    a = (torch.tanh(mean + latent @ self.w) * self.scale + self.bias).numpy()
                else:
                    a = self.policy(obs)[0].numpy()
            o, r, nxt, term = self.envs.step(a)
            self.buf.add(o, a, r, nxt, term)
            self.env_steps += len(a)

    def ready(self) -> bool:
        return self.env_steps >= self.t.learning_starts and self.buf.size >= self.t.batch_size

    def q_both(self, nets, obs: torch.Tensor, action: torch.Tensor):
        x = torch.cat([obs, action], -1)
        return nets[0](x).squeeze(-1), nets[1](x).squeeze(-1)

    def update(self, s: Dict[str, torch.Tensor]) -> None:
        p = self.p
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            next_a, next_logp = self.policy(s["next_obs"])
            next_q = torch.min(*self.q_both(self.q_targets, s["next_obs"], next_a))
            target = s["reward"] + (1.0 - s["term"]) * p.gamma * (next_q - alpha * next_logp)
        q1, q2 = self.q_both(self.qs, s["obs"], s["action"])
        q_loss = F.mse_loss(q1, target) + F.mse_loss(q2, target)
        self.critic_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        if self.updates % p.policy_frequency == 0:
            for _ in range(p.policy_frequency):
                a, logp = self.policy(s["obs"])
                q = torch.min(*self.q_both(self.qs, s["obs"], a))
                actor_loss = (alpha * logp - q).mean()
                self.actor_opt.zero_grad(set_to_none=True)
                actor_loss.backward()
                self.actor_opt.step()
                if self.alpha_opt is not None:
                    alpha_loss = -(self.log_alpha.exp() * (logp.detach() + self.target_entropy)).mean()
                    self.alpha_opt.zero_grad(set_to_none=True)
                    alpha_loss.backward()
                    self.alpha_opt.step()
                    alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            for q, qt in zip(self.qs, self.q_targets):
                for w, wt in zip(q.parameters(), qt.parameters()):
                    wt.lerp_(w, p.tau)

    def step(self) -> None:
        _collect_then_update(self)


class TD3Floor:
    def __init__(self, cfg: Any) -> None:
        p, t = cfg.policy, cfg.train
        self.p, self.t = p, t
        self.envs = Envs(cfg.env.name, cfg.env.num_envs)
        space = self.envs.envs[0].action_space
        obs_dim, act_dim = self.envs.envs[0].observation_space.shape[0], space.shape[0]
        self.low, self.high = space.low.astype(np.float32), space.high.astype(np.float32)
        self.scale = torch.as_tensor((self.high - self.low) / 2.0)
        self.bias = torch.as_tensor((self.high + self.low) / 2.0)
        h = list(p.hidden_sizes)
        self.actor = _mlp(obs_dim, h, act_dim, out_gain=0.01)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.qs = [_mlp(obs_dim + act_dim, h, 1) for _ in range(2)]
        self.q_targets = [copy.deepcopy(q).requires_grad_(False) for q in self.qs]
        q_lr = p.q_lr or p.optim.lr
        fused = bool(getattr(p, "fused_optimizer", False))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=p.optim.lr, eps=p.optim.eps, fused=fused)
        critic = [w for q in self.qs for w in q.parameters()]
        self.critic_opt = torch.optim.Adam(critic, lr=q_lr, eps=p.optim.eps, fused=fused)
        self.buf = Replay(cfg.buffer.capacity, obs_dim, (act_dim,), np.float32)
        self.rng = np.random.default_rng(1)
        self.env_steps, self.updates, self.act_dim = 0, 0, act_dim

    def pi(self, net: nn.Module, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(net(obs)) * self.scale + self.bias

    def collect(self, steps: int) -> None:
        p = self.p
        for _ in range(steps):
            obs = self.envs.obs
            if self.env_steps < p.uniform_steps:
                a = self.rng.uniform(self.low, self.high, (len(obs), self.act_dim)).astype(np.float32)
            else:
                with torch.no_grad():
                    a = self.pi(self.actor, torch.from_numpy(obs)).numpy()
                a = a + self.rng.normal(0.0, 1.0, a.shape) * p.exploration_noise * (self.high - self.low) / 2.0
                a = np.clip(a, self.low, self.high).astype(np.float32)
            o, r, nxt, term = self.envs.step(a)
            self.buf.add(o, a, r, nxt, term)
            self.env_steps += len(a)

    def ready(self) -> bool:
        return self.env_steps >= self.t.learning_starts and self.buf.size >= self.t.batch_size

    def update(self, s: Dict[str, torch.Tensor]) -> None:
        p = self.p
        with torch.no_grad():
            noise = (torch.randn_like(s["action"]) * p.target_policy_noise * self.scale).clamp(
                -p.target_noise_clip * self.scale, p.target_noise_clip * self.scale
            )
            next_a = torch.maximum(
                torch.minimum(self.pi(self.actor_target, s["next_obs"]) + noise, self.bias + self.scale),
                self.bias - self.scale,
            )
            x = torch.cat([s["next_obs"], next_a], -1)
            next_q = torch.min(self.q_targets[0](x), self.q_targets[1](x)).squeeze(-1)
            target = s["reward"] + p.gamma * (1.0 - s["term"]) * next_q
        x = torch.cat([s["obs"], s["action"]], -1)
        q_loss = F.mse_loss(self.qs[0](x).squeeze(-1), target) + F.mse_loss(self.qs[1](x).squeeze(-1), target)
        self.critic_opt.zero_grad(set_to_none=True)
        q_loss.backward()
        self.critic_opt.step()
        self.updates += 1
        if self.updates % p.policy_delay == 0:
            actor_loss = -self.qs[0](torch.cat([s["obs"], self.pi(self.actor, s["obs"])], -1)).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            with torch.no_grad():
                for net, tgt in [(self.actor, self.actor_target), *zip(self.qs, self.q_targets)]:
                    for w, wt in zip(net.parameters(), tgt.parameters()):
                        wt.lerp_(w, p.tau)

    def step(self) -> None:
        _collect_then_update(self)


FLOORS: Dict[str, Callable[[Any], Any]] = {"dqn": DQNFloor, "sac": SACFloor, "td3": TD3Floor}


def preset_config(name: str, run_dir: str, overrides=()) -> Any:
    from rlightning.utils.config import apply_overrides, load_preset

    return apply_overrides(
        load_preset(name),
        [
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={run_dir}",
            "train.target_return=null",
            "train.total_env_steps=null",
            "train.iterations=100000000",
            "train.eval_interval=0",
            "train.checkpoint_interval=0",
            *overrides,
        ],
    )


def warm_up(engine: Any, floor: Any, limit: int = 100_000) -> int:
    """Step both sides until each trains (past ``learning_starts``, a stored episode, TD3's uniform steps)."""
    uniform = int(getattr(engine.config.policy, "uniform_steps", 0) or 0)
    n = 0
    while n < limit:
        n += 1
        m = engine.step()
        if any(k.endswith("loss") for k in m) and engine.env_steps >= uniform:
            break
    while not (floor.ready() and floor.env_steps >= uniform):
        floor.step()
    return n


def measure(name: str, iters: int, rounds: int, clock: str = "wall", warm: int = 0, overrides=()) -> Dict[str, Any]:
    """Ours and the floor of preset ``name``, ``rounds`` alternating windows of ``iters`` iterations each.

    ``warm``: iterations both sides run past the point where they train before the windows (DQN's
    exploration decays over them: ``--warm 3000`` measures acrobot_dqn at its final epsilon).
    """
    from rlightning.utils.builders import build_run

    timer = time.process_time if clock == "cpu" else time.perf_counter
    with tempfile.TemporaryDirectory() as run_dir:
        cfg = preset_config(name, run_dir, overrides)
        engine = build_run(cfg).engine
        try:
            floor = FLOORS[cfg.policy.type](cfg)
            warm_its = warm_up(engine, floor)
            for _ in range(warm):
                engine.step()
                floor.step()
            ours_ms, floor_ms, ratios = [], [], []
            for _ in range(rounds):
                t0 = timer()
                for _ in range(iters):
                    engine.step()
                a = (timer() - t0) / iters * 1e3
                t0 = timer()
                for _ in range(iters):
                    floor.step()
                b = (timer() - t0) / iters * 1e3
                ours_ms.append(a)
                floor_ms.append(b)
                ratios.append(a / b)
        finally:
            engine.close()
    return {
        "preset": name,
        "warm_up_iterations": warm_its + warm,
        "ours_ms": statistics.median(ours_ms),
        "floor_ms": statistics.median(floor_ms),
        "ratio": statistics.median(ratios),
        "ratios": ratios,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--presets", default=",".join(PRESETS), help="comma-separated off-policy presets")
    p.add_argument("--iters", type=int, default=0, help="iterations per window (0: a per-preset default)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall", help="wall-clock or this process's CPU time")
    p.add_argument("--warm", type=int, default=0, help="iterations of both sides after they train, before timing")
    p.add_argument("--set", nargs="*", default=[], help="config overrides for both sides (key=value)")
    a = p.parse_args()
    torch.set_num_threads(1)
    runs = []
    for name in a.presets.split(","):
        if name not in DEFAULT_ITERS:
            raise SystemExit(f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
        r = measure(name, a.iters or DEFAULT_ITERS[name], a.rounds, a.clock, a.warm, a.set)
        per = ", ".join(f"{x:.2f}" for x in r["ratios"])
        print(
            f"{name}: ours {r['ours_ms']:.2f} ms/iteration, floor {r['floor_ms']:.2f} ms/iteration, "
            f"ours / floor median {r['ratio']:.2f} ({per})",
            flush=True,
        )
        runs.append(r)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.report import save

    lines = [
        f"{a.clock} clock, {a.rounds} rounds, interleaved; overrides: {' '.join(a.set) or 'none'}",
        "",
        "| preset | ours ms / iteration | floor ms / iteration | ours / floor (median) | per round |",
        "|---|---|---|---|---|",
    ]
    for r in runs:
        per = ", ".join(f"{x:.2f}" for x in r["ratios"])
        lines.append(f"| {r['preset']} | {r['ours_ms']:.2f} | {r['floor_ms']:.2f} | {r['ratio']:.2f} | {per} |")
    save(
        "offpolicy_floor",
        "Off-policy presets against their floor (a plain torch + gymnasium loop)",
        "\n".join(lines),
        data=runs,
    )


if __name__ == "__main__":
    main()
