"""d3rlpy's side of benchmarks/offline.py: one algorithm, one seed, one Minari dataset; prints one JSON line.

Runs in d3rlpy's own venv (``.bench/venvs/d3rlpy``: torch 2.13.0 CPU, d3rlpy 2.8.1, minari 0.5.4):

    .bench/venvs/d3rlpy/bin/python benchmarks/offline_d3rlpy.py --algo iql --seed 0 --dataset <folder> --steps 2000

The dataset is read with ``minari`` (as d3rlpy's own Minari loader does) into a ``d3rlpy.dataset.MDPDataset``;
the algorithm gets the hyperparameters rlightning's run gets (benchmarks/offline.py passes them), trains for
``--steps`` gradient steps, then plays ``--episodes`` deterministic episodes in the dataset's env.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np


def load(path: str):
    import d3rlpy
    import minari

    t0 = time.perf_counter()
    ds = minari.MinariDataset(f"{path}/data")
    obs, actions, rewards, terms, timeouts = [], [], [], [], []
    for ep in ds.iterate_episodes():
        obs.append(ep.observations[:-1])
        actions.append(ep.actions)
        rewards.append(ep.rewards)
        terms.append(ep.terminations)
        trunc = np.array(ep.truncations, copy=True)
        trunc[-1] = trunc[-1] or not ep.terminations[-1]
        timeouts.append(trunc)
    dataset = d3rlpy.dataset.MDPDataset(
        np.concatenate(obs).astype(np.float32),
        np.concatenate(actions).astype(np.float32),
        np.concatenate(rewards).astype(np.float32),
        np.concatenate(terms).astype(np.float32),
        np.concatenate(timeouts).astype(np.float32),
    )
    return ds, dataset, time.perf_counter() - t0


def build(algo: str, hidden: list, params: dict):
    import d3rlpy

    enc = d3rlpy.models.VectorEncoderFactory(hidden)
    adam = d3rlpy.optimizers.AdamFactory()
    if algo == "bc":
        return d3rlpy.algos.BCConfig(
            batch_size=256, learning_rate=params["lr"], policy_type="deterministic", encoder_factory=enc,
            optim_factory=adam,
        ).create(device="cpu:0")  # fmt: skip
    if algo == "iql":
        return d3rlpy.algos.IQLConfig(
            batch_size=256, actor_learning_rate=params["lr"], critic_learning_rate=params["q_lr"],
            actor_encoder_factory=enc, critic_encoder_factory=enc, value_encoder_factory=enc,
            expectile=0.7, weight_temp=3.0, max_weight=100.0, tau=0.005,
            observation_scaler=d3rlpy.preprocessing.StandardObservationScaler(),
        ).create(device="cpu:0")  # fmt: skip
    if algo == "cql":
        return d3rlpy.algos.CQLConfig(
            batch_size=256, actor_learning_rate=params["lr"], critic_learning_rate=params["q_lr"],
            temp_learning_rate=params["lr"], alpha_learning_rate=0.0, initial_alpha=1.0,
            actor_encoder_factory=enc, critic_encoder_factory=enc, conservative_weight=10.0, n_action_samples=10,
            tau=0.005, alpha_threshold=10.0,
        ).create(device="cpu:0")  # fmt: skip
    raise ValueError(f"unknown algorithm {algo!r}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algo", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--hidden", default="64,64")
    parser.add_argument("--params", default="{}")
    args = parser.parse_args()

    import d3rlpy
    import torch

    torch.set_num_threads(1)
    d3rlpy.seed(args.seed)
    minari_ds, dataset, load_s = load(args.dataset)
    algo = build(args.algo, [int(h) for h in args.hidden.split(",")], json.loads(args.params))
    t0 = time.perf_counter()
    algo.fit(
        dataset, n_steps=args.steps, n_steps_per_epoch=args.steps, show_progress=False, save_interval=10**9,
        logger_adapter=d3rlpy.logging.NoopAdapterFactory(),
    )  # fmt: skip
    train_s = time.perf_counter() - t0
    env = minari_ds.recover_environment()
    returns = []
    for k in range(args.episodes):
        obs, _ = env.reset(seed=100_003 + k)
        total, done = 0.0, False
        while not done:
            action = algo.predict(np.asarray(obs, np.float32)[None])[0]
            obs, reward, term, trunc, _ = env.step(action)
            total += float(reward)
            done = term or trunc
        returns.append(total)
    print(json.dumps({"load_s": load_s, "train_s": train_s, "return_mean": float(np.mean(returns)),
                      "steps": args.steps, "transitions": int(dataset.transition_count)}))  # fmt: skip


if __name__ == "__main__":
    main()
