"""Driver scripts the remote-cluster tests run in fresh interpreters.

python -m tests.support.remote_driver train ADDRESS TOKEN_FILE
python -m tests.support.remote_driver actors ADDRESS TOKEN_FILE
"""

from __future__ import annotations

import json
import sys


def tiny_config():
    from rlightning.utils.config import apply_overrides, load_preset

    return apply_overrides(
        load_preset("cartpole_ppo"),
        [
            "env.num_workers=2",
            "env.num_envs=4",
            "env.num_cpus=0.5",
            "train.rollout_steps=32",
            "train.iterations=2",
            "cluster.remote_env=true",
            "cluster.remote_eval=true",
            "cluster.remote_train=true",
            "cluster.eval_each_cpu_num=0.5",
            "cluster.train_each_cpu_num=0.5",
            "log.progress=false",
            "log.jsonl=false",
        ],
    )


def train(address: str, token_file: str) -> None:
    """Join with the token itself (not the file), log at DEBUG, and show everything a notebook would."""
    import logging
    from pathlib import Path

    from rlightning.notebook import Lab

    logging.basicConfig(level=logging.DEBUG)
    lab = Lab.connect(address, token=Path(token_file).read_text().strip())
    info = lab.cluster_info()
    print(repr(lab), lab._repr_html_(), info)
    run = lab.build(tiny_config())
    history = run.run(2)
    print(repr(run), run.metrics)
    run2 = lab.build(tiny_config())  # re-running the cell replaces the first run
    replaced = run._closed and not run2._closed
    lab.shutdown()
    print(
        json.dumps(
            {"iterations": len(history), "node_ips": info["node_ips"], "cpus": info["cpus"], "replaced": replaced}
        )
    )


def actors(address: str, token_file: str) -> None:
    from rlightning.notebook import Lab

    lab = Lab.connect(address, token_file=token_file)
    from tests.support.cluster import alive_actor_classes

    alive = alive_actor_classes()
    lab.shutdown()
    print(json.dumps({"alive": alive}))


if __name__ == "__main__":
    {"train": train, "actors": actors}[sys.argv[1]](sys.argv[2], sys.argv[3])
