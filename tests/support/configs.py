"""Small configs the tests build: seconds per iteration on two cores."""

from __future__ import annotations

from rlightning.utils.config import MainConfig, apply_overrides, load_preset

LOCAL = [
    "cluster.remote_env=false",
    "cluster.remote_eval=false",
    "cluster.remote_train=false",
    "cluster.remote_storage=false",
]
REMOTE = [
    "cluster.remote_env=true",
    "cluster.remote_eval=true",
    "cluster.remote_train=true",
    "cluster.remote_storage=true",
    "env.num_cpus=0.25",
    "cluster.eval_each_cpu_num=0.25",
    "cluster.train_each_cpu_num=0.25",
    "cluster.buffer_each_cpu_num=0.25",
]


def small_ppo(tmp_path, remote: bool = False, *extra: str) -> MainConfig:
    """cartpole_ppo shrunk to seconds per iteration."""
    return apply_overrides(
        load_preset("cartpole_ppo"),
        [
            "env.num_workers=2",
            "env.num_envs=4",
            "train.rollout_steps=32",
            "train.iterations=3",
            "log.progress=false",
            f"log.run_dir={tmp_path}",
            *(REMOTE if remote else LOCAL),
            *extra,
        ],
    )


def small_sac(tmp_path, remote: bool = False, *extra: str) -> MainConfig:
    """pendulum_sac shrunk to seconds per iteration."""
    return apply_overrides(
        load_preset("pendulum_sac"),
        [
            "env.num_workers=1",
            "env.num_envs=2",
            "train.rollout_steps=16",
            "train.iterations=3",
            "train.batch_size=32",
            "train.learning_starts=32",
            "env.max_episode_steps=20",
            "train.target_return=null",
            "log.progress=false",
            f"log.run_dir={tmp_path}",
            *(REMOTE if remote else LOCAL),
            *extra,
        ],
    )
