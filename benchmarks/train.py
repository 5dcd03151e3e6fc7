"""Time to solve CartPole-v1 with `cartpole_ppo`: rlightning local, on Ray workers, and a plain PPO loop.

The plain loop is the same PPO (same network, hyperparameters, GAE, clipped
objective, minibatch epochs, rollout size) written as one single-process
script over ``gymnasium.make_vec``: the limit of the framework's overhead.
Every side runs with one torch thread. Prints a markdown table with wall-clock
seconds and env steps to a mean return >= 475 over the last 20 episodes, and
the ratios rlightning / plain loop.

    python benchmarks/train.py            # all three sides
    python benchmarks/train.py --sides plain local
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Dict

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from rlightning.utils.config import MainConfig, apply_overrides, load_preset  # noqa: E402

torch.set_num_threads(1)
TARGET = 475.0
WINDOW = 20


def _mlp(inp: int, out: int, hidden, std: float) -> nn.Sequential:
    layers, last = [], inp
    for h in hidden:
        lin = nn.Linear(last, h)
        nn.init.orthogonal_(lin.weight, np.sqrt(2))
        nn.init.zeros_(lin.bias)
        layers += [lin, nn.Tanh()]
        last = h
    head = nn.Linear(last, out)
    nn.init.orthogonal_(head.weight, std)
    nn.init.zeros_(head.bias)
    return nn.Sequential(*layers, head)


def plain_ppo(cfg: MainConfig, seed: int) -> Dict[str, float]:
    """CleanRL-style PPO over one vectorised env with as many sub-envs as the preset has in all."""
    p, t = cfg.policy, cfg.train
    n_envs = cfg.env.num_envs * cfg.env.num_workers
    envs = gym.make_vec(cfg.env.name, num_envs=n_envs, vectorization_mode="vector_entry_point")
    torch.manual_seed(seed)
    obs_dim = envs.single_observation_space.shape[0]
    n_act = int(envs.single_action_space.n)
    actor = _mlp(obs_dim, n_act, p.hidden_sizes, 0.01)
    critic = _mlp(obs_dim, 1, p.hidden_sizes, 1.0)
    params = list(actor.parameters()) + list(critic.parameters())
    opt = torch.optim.Adam(params, lr=p.optim.lr, eps=p.optim.eps)
    steps = t.rollout_steps
    obs_buf = torch.zeros(steps, n_envs, obs_dim)
    act_buf = torch.zeros(steps, n_envs, dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros(steps, n_envs) for _ in range(4))
    obs, _ = envs.reset(seed=seed)
    obs = torch.as_tensor(obs, dtype=torch.float32)
    done = torch.zeros(n_envs)
    ep_ret, ep_len = np.zeros(n_envs), np.zeros(n_envs)
    returns: deque = deque(maxlen=WINDOW)
    env_steps, t0 = 0, time.perf_counter()
    for it in range(t.iterations):
        if p.optim.anneal_lr:
            for g in opt.param_groups:
                g["lr"] = p.optim.lr * (1.0 - it / t.iterations)
        for s in range(steps):
            with torch.no_grad():
                dist = torch.distributions.Categorical(logits=actor(obs))
                action = dist.sample()
                val_buf[s] = critic(obs).squeeze(-1)
            obs_buf[s], act_buf[s], logp_buf[s], done_buf[s] = obs, action, dist.log_prob(action), done
            nxt, rew, term, trunc, _ = envs.step(action.numpy())
            ep_ret += rew
            ep_len += 1
            d = np.logical_or(term, trunc)
            for i in np.flatnonzero(d):
                returns.append(ep_ret[i])
                ep_ret[i] = ep_len[i] = 0
            rew_buf[s] = torch.as_tensor(rew, dtype=torch.float32)
            obs = torch.as_tensor(nxt, dtype=torch.float32)
            done = torch.as_tensor(d, dtype=torch.float32)
            env_steps += n_envs
        with torch.no_grad():
            next_val = critic(obs).squeeze(-1)
            adv = torch.zeros_like(rew_buf)
            last = torch.zeros(n_envs)
            for s in reversed(range(steps)):
                nv, nd = (next_val, done) if s == steps - 1 else (val_buf[s + 1], done_buf[s + 1])
                delta = rew_buf[s] + p.gamma * nv * (1 - nd) - val_buf[s]
                last = delta + p.gamma * p.gae_lambda * (1 - nd) * last
                adv[s] = last
            ret = adv + val_buf
        b_obs, b_act, b_logp = obs_buf.reshape(-1, obs_dim), act_buf.reshape(-1), logp_buf.reshape(-1)
        b_adv, b_ret, b_val = adv.reshape(-1), ret.reshape(-1), val_buf.reshape(-1)
        n = b_obs.shape[0]
        mb = n // p.num_minibatches
        for _ in range(p.update_epochs):
            perm = torch.randperm(n)
            for k in range(p.num_minibatches):
                idx = perm[k * mb : (k + 1) * mb]
                dist = torch.distributions.Categorical(logits=actor(b_obs[idx]))
                ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
                a = b_adv[idx]
                a = (a - a.mean()) / (a.std() + 1e-8)
                pg = torch.max(-a * ratio, -a * ratio.clamp(1 - p.clip_coef, 1 + p.clip_coef)).mean()
                v = critic(b_obs[idx]).squeeze(-1)
                v_clip = b_val[idx] + (v - b_val[idx]).clamp(-p.clip_coef, p.clip_coef)
                vloss = 0.5 * torch.max((v - b_ret[idx]) ** 2, (v_clip - b_ret[idx]) ** 2).mean()
                loss = pg - p.ent_coef * dist.entropy().mean() + p.vf_coef * vloss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, p.optim.max_grad_norm)
                opt.step()
        if len(returns) == WINDOW and np.mean(returns) >= TARGET:
            break
    envs.close()
    return {"seconds": time.perf_counter() - t0, "env_steps": env_steps, "return": float(np.mean(returns))}


def rlightning_side(cfg: MainConfig, remote: bool) -> Dict[str, float]:
    """`cartpole_ppo` through the builders, local workers or Ray env workers."""
    from rlightning.utils.builders import build_run
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    overrides = [
        f"cluster.remote_env={str(remote).lower()}",
        "log.progress=false",
        "log.jsonl=false",
        f"train.return_window={WINDOW}",
        f"train.target_return={TARGET}",
    ]
    cfg = apply_overrides(cfg, overrides)
    if remote:
        acquire_ray(num_cpus=4, log_to_driver=False)
    try:
        engine = build_run(cfg).engine
        t0 = time.perf_counter()
        engine.run()
        seconds = time.perf_counter() - t0
        result = {
            "seconds": seconds,
            "env_steps": engine.env_steps,
            "return": float(engine.last_metrics.get("episode_return_mean", 0.0)),
        }
        engine.close()
    finally:
        if remote:
            release_ray()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", nargs="+", default=["plain", "local", "ray"], choices=["plain", "local", "ray"])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args()
    cfg = load_preset("cartpole_ppo")
    cfg.seed = args.seed
    results = {}
    for side in args.sides:
        if side == "plain":
            results[side] = plain_ppo(cfg, args.seed)
        else:
            results[side] = rlightning_side(cfg, remote=side == "ray")
        print(f"{side}: {results[side]}", flush=True)
    limit = results.get("plain")
    lines = [
        "| side | seconds to solve | env steps | final mean return | seconds / plain loop |",
        "|---|---|---|---|---|",
    ]
    for side, r in results.items():
        ratio = f"{r['seconds'] / limit['seconds']:.2f}" if limit else "-"
        lines.append(f"| {side} | {r['seconds']:.1f} | {r['env_steps']} | {r['return']:.1f} | {ratio} |")
    lines += [
        "",
        f"threads: torch {torch.get_num_threads()}, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}; "
        f"target: mean return >= {TARGET} over the last {WINDOW} episodes",
    ]
    print("\n" + "\n".join(lines))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.report import save

    save(
        "train",
        "Time to solve CartPole-v1 with cartpole_ppo: rlightning local and on Ray, beside a plain PPO loop",
        "\n".join(lines),
        data=results,
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
