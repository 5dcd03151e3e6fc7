"""Driver the multinode tests run in a fresh interpreter: its own `ray.cluster_utils.Cluster` on this machine.

python -m tests.multinode.cluster_driver OUT_JSON

Head (the driver's node, 2 CPUs) and raylets ``node_a`` and ``node_b`` (2 CPUs each; ``env_slot`` 1 and
``trainer`` 1 each), later ``node_c`` (``env_slot`` 1, no ``trainer``). Writes what it observed, from
Ray's node ids, to OUT_JSON; the tests assert on it.
"""

from __future__ import annotations

import hashlib
import json
import sys


def _config(**over):
    from rlightning.utils.config import load_preset

    items = {
        "env.num_workers": 2,
        "env.num_envs": 2,
        "env.num_cpus": 0.25,
        "env.resources": {"env_slot": 1},
        "train.rollout_steps": 16,
        "train.iterations": 2,
        "cluster.remote_env": True,
        "cluster.remote_eval": True,
        "cluster.remote_train": True,
        "cluster.remote_storage": True,
        "cluster.eval_each_cpu_num": 0.25,
        "cluster.train_each_cpu_num": 0.25,
        "cluster.buffer_each_cpu_num": 0.25,
        "cluster.buffer_worker_num": 2,
        "cluster.train_worker_num": 2,
        "cluster.train_resources": {"trainer": 1},
        "cluster.train_placement": "SPREAD",
        "buffer.node_affinity_env": True,
        "buffer.node_affinity_train": True,
        "log.progress": False,
        "log.jsonl": False,
    }
    items.update(over)
    cfg = load_preset("cartpole_ppo")
    data = cfg.model_dump()
    for key, value in items.items():
        section, field = key.split(".")
        data[section][field] = value
    return type(cfg).model_validate(data)


def _checksum(weights) -> str:
    import numpy as np

    h = hashlib.sha256()
    for k in sorted(weights):
        h.update(k.encode())
        h.update(np.ascontiguousarray(np.asarray(weights[k])).tobytes())
    return h.hexdigest()


def _where(engine):
    """Env worker, shard and train worker node ids, and what each shard holds, read from the actors."""
    from rlightning.utils.ray.handle import resolve
    from rlightning.utils.ray.placement_groups import actor_node_ids

    workers = engine.env_group.workers
    env_nodes = dict(zip(workers, actor_node_ids(workers.values())))
    shards = engine.buffer.storages
    return {
        "env_nodes": env_nodes,
        "shard_nodes": actor_node_ids(shards),
        "shard_envs": [st["env_ids"] for st in resolve([s.stats.remote() for s in shards])],
        "shard_sizes": resolve([s.get_size.remote() for s in shards]),
        "train_nodes": actor_node_ids(engine.policy_group.train_workers),
    }


def affinity_and_dp(ray, out):
    from ray.util.placement_group import placement_group_table

    from rlightning.utils.builders import build_run
    from rlightning.utils.ray.handle import resolve

    engine = build_run(_config()).engine
    try:
        engine.reset_envs()
        engine.rollout()
        out["affinity"] = _where(engine)
        table = engine.buffer.episode_table
        out["affinity"]["train_shards"] = [table.get_storages_for_train_worker(w) for w in range(2)]
        out["affinity"]["env_to_storage"] = table.get_env_to_storage()
        pg = engine.policy_group.train_placement
        bundles = placement_group_table(pg.pg)["bundles_to_node_id"]
        out["pg"] = {"strategy": pg.strategy, "bundle_nodes": sorted(bundles.values())}
        engine.update_dataset()
        engine.train()
        engine.sync_weights()
        engine.step()
        weights = resolve([h.submit("get_weights") for h in engine.policy_group.train_workers])
        out["dp"] = {"checksums": [_checksum(w) for w in weights], "iterations": engine.iteration}
    finally:
        engine.close()
    out["pg_left"] = [p for p in placement_group_table().values() if p["state"] != "REMOVED"]


def node_loss(ray, cluster, out):
    from rlightning.utils.builders import build_run

    cluster.add_node(num_cpus=2, resources={"node_c": 10, "env_slot": 1})
    cluster.wait_for_nodes()
    engine = build_run(_config(**{"cluster.train_worker_num": 1, "cluster.train_placement": None})).engine
    try:
        engine.step()
        before = _where(engine)
        victim_id = next(n for n in before["env_nodes"].values() if n not in before["train_nodes"])
        victim = next(n for n in cluster.list_all_nodes() if n.node_id == victim_id)
        cluster.remove_node(victim)
        metrics = [engine.step() for _ in range(2)]
        after = _where(engine)
        out["node_loss"] = {
            "victim": victim_id,
            "before": before,
            "after": after,
            "lost_shards": [dict(s, cause=str(s["cause"])) for s in engine.buffer.lost_shards],
            "iterations": engine.iteration,
            "env_restarts": engine.restart_counts(),
            "env_steps": [m["env_steps"] for m in metrics],
        }
    finally:
        engine.close()


def main(path: str) -> None:
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    out = {"nodes": {}}
    try:
        for name in ("node_a", "node_b"):
            node = cluster.add_node(num_cpus=2, resources={name: 10, "env_slot": 1, "trainer": 1})
            out["nodes"][name] = node.node_id
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
        out["head"] = ray.get_runtime_context().get_node_id()
        affinity_and_dp(ray, out)
        node_loss(ray, cluster, out)
    finally:
        with open(path, "w") as f:
            json.dump(out, f, default=str)
        ray.shutdown()
        cluster.shutdown()


if __name__ == "__main__":
    main(sys.argv[1])
