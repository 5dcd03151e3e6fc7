"""The offline engine: BC from expert CartPole data, its metrics, checkpoints into datasets, and refusals."""

from __future__ import annotations

import minari
import numpy as np
import pytest

from rlightning import datasets
from rlightning.cli import main
from rlightning.utils.builders import build_run
from rlightning.utils.config import ConfigError, config_from_dict
from tests.support.offline_data import cartpole_expert_dataset, pendulum_random_dataset  # noqa: F401 - fixtures


def offline_config(dataset, policy, env="CartPole-v1", run_dir="runs", **train):
    return config_from_dict(
        {
            "engine": "offline",
            "seed": 0,
            "env": {"name": env, "num_envs": 5},
            "policy": policy,
            "buffer": {"type": "replay", "capacity": 20_000},
            "train": {"dataset": str(dataset), "batch_size": 256, **train},
            "log": {"progress": False, "run_dir": str(run_dir)},
        }
    )


def test_bc_from_20_expert_cartpole_episodes_reaches_475(cartpole_expert_dataset, tmp_path, capsys):  # noqa: F811
    # BC on expert data recovers the expert: CORL's BC reaches the expert's normalised score (~100) on D4RL's
    # expert datasets; here 20 scripted expert episodes (return 500) and 400 gradient steps of a 64x64 policy.
    cfg = offline_config(
        cartpole_expert_dataset,
        {"type": "bc", "hidden_sizes": [64, 64], "activation": "relu", "optim": {"lr": 1e-3, "max_grad_norm": None}},
        iterations=4,
        updates_per_iteration=100,
        eval_interval=4,
        eval_episodes=10,
    )
    cfg.log.run_dir = str(tmp_path)
    parts = build_run(cfg)
    try:
        history = parts.engine.run()
        last = history[-1]
        assert last["eval_return_mean"] >= 475, last
        assert last["eval_normalized_score"] == pytest.approx(
            100
            * (last["eval_return_mean"] - parts.engine.dataset_info.ref_min_score)
            / (500.0 - parts.engine.dataset_info.ref_min_score)
        )
        assert last["gradient_steps"] == 400 and last["dataset_episodes"] == 20 and last["dataset_return_mean"] == 500
        assert last["env_steps"] == 0 and last["accuracy"] > 0.8  # no env step collected; the actions cloned
        assert "eval_return_mean" not in history[0]  # evaluated every train.eval_interval iterations only
        ckpt = parts.engine.save()
    finally:
        parts.engine.close()

    # the trained policy, as a checkpoint, into a dataset from the command line
    out = tmp_path / "bc_dataset"
    assert (
        main(
            ["dataset", "collect", str(ckpt), str(out), "--episodes", "2", "--deterministic", "--ref-max-score", "500"]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "episodes        2 (" in printed and "expert 500.0" in printed
    read = minari.MinariDataset(out / "data")
    assert read.total_episodes == 2 and read.env_spec.id == "CartPole-v1"
    assert min(float(np.sum(e.rewards)) for e in read.iterate_episodes()) >= 475
    assert main(["dataset", "collect", str(ckpt), str(out)]) == 2
    assert "already; pass overwrite=True" in capsys.readouterr().err


def test_run_collect_dataset_plays_the_current_policy(cartpole_expert_dataset, tmp_path):  # noqa: F811
    from rlightning.notebook.run import Run

    cfg = offline_config(
        cartpole_expert_dataset, {"type": "bc", "hidden_sizes": [16]}, iterations=1, updates_per_iteration=1
    )
    cfg.log.run_dir = str(tmp_path)
    parts = build_run(cfg)
    run = Run("offline", cfg, parts)
    try:
        info = run.collect_dataset(tmp_path / "noisy", episodes=3, noise=0.5, ref_max_score="policy", ref_episodes=2)
    finally:
        run.close()
    assert info.total_episodes == 3 and info.ref_max_score is not None and info.ref_min_score is not None
    assert "noise 0.5" in info.metadata["description"]
    with pytest.raises(ValueError, match=r"noise must be in \[0, 1\]"):
        datasets.collect.collect_episodes(None, "CartPole-v1", 1, noise=2.0)


def test_bad_offline_configs_are_refused_by_name(cartpole_expert_dataset, pendulum_random_dataset, tmp_path):  # noqa: F811
    bc = {"type": "bc", "hidden_sizes": [16]}
    cfg = offline_config(cartpole_expert_dataset, bc, run_dir=tmp_path)
    cfg.train.dataset = None
    with pytest.raises(ValueError, match="engine 'offline' trains from a dataset: set train.dataset"):
        build_run(cfg)
    cfg = offline_config(tmp_path / "missing", bc, run_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="no dataset at"):
        build_run(cfg)
    cfg = offline_config(cartpole_expert_dataset, bc, run_dir=tmp_path)
    cfg.buffer.type = "rollout"
    with pytest.raises(ValueError, match="set buffer.type=replay"):
        build_run(cfg)
    cfg = offline_config(cartpole_expert_dataset, bc, run_dir=tmp_path)
    cfg.buffer.sampler = "all"
    with pytest.raises(ValueError, match="needs buffer.unit='transition' and buffer.sampler 'uniform' or 'prio"):
        build_run(cfg)
    cfg = offline_config(pendulum_random_dataset, bc, run_dir=tmp_path)  # a Pendulum dataset for a CartPole run
    with pytest.raises(ValueError, match=r"has observation space Box\(.*but the env has"):
        build_run(cfg)
    for algo in ("cql", "iql", "td3_bc"):  # continuous-action algorithms, a discrete dataset and env
        cfg = offline_config(cartpole_expert_dataset, {"type": algo, "hidden_sizes": [16]}, run_dir=tmp_path)
        with pytest.raises(
            ConfigError, match=f"policy '{algo}' supports continuous actions, but env 'CartPole-v1' has a discrete"
        ):
            build_run(cfg)
    for algo in ("discrete_cql", "discrete_iql"):  # discrete-action algorithms, a continuous dataset and env
        cfg = offline_config(pendulum_random_dataset, {"type": algo}, env="Pendulum-v1", run_dir=tmp_path)
        with pytest.raises(ConfigError, match=f"policy '{algo}' supports discrete actions, but env 'Pendulum-v1'"):
            build_run(cfg)
        with pytest.raises(ConfigError, match=f"{algo} learns offline.*target_update_interval"):
            offline_config(cartpole_expert_dataset, {"type": algo, "target_update_interval": 10})
