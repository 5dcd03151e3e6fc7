"""Several raylets on one machine (`ray.cluster_utils.Cluster`): placement by node, data parallelism, node loss.

One driver process (tests/multinode/cluster_driver.py) builds the cluster, runs the scenarios and reports
what it saw from Ray's node ids; the session's own Ray runtime is not touched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.multinode, pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("multinode") / "report.json"
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.multinode.cluster_driver", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1400,
    )
    data = json.loads(out.read_text()) if out.exists() else {}
    if proc.returncode != 0:
        pytest.fail(f"multinode driver exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return data


def test_env_workers_land_on_the_nodes_their_resources_name(report):
    nodes = report["affinity"]["env_nodes"]
    # env.resources={"env_slot": 1}: node_a and node_b offer one slot each, the head none
    assert sorted(nodes.values()) == sorted(report["nodes"].values())
    assert report["head"] not in nodes.values()


def test_every_transition_lands_in_a_shard_on_its_env_workers_node(report):
    a = report["affinity"]
    assert sorted(a["shard_nodes"]) == sorted(a["env_nodes"].values())  # one shard per env node
    assert all(size > 0 for size in a["shard_sizes"])
    for shard, (node, env_ids) in enumerate(zip(a["shard_nodes"], a["shard_envs"])):
        assert env_ids, f"shard {shard} got no data"
        for env_id in env_ids:  # every env that wrote into this shard runs on its node
            assert a["env_nodes"][env_id] == node
            assert a["env_to_storage"][env_id] == shard


def test_each_train_worker_samples_from_shards_on_its_node(report):
    a = report["affinity"]
    assert len(set(a["train_nodes"])) == 2
    for worker, shards in enumerate(a["train_shards"]):
        assert shards
        assert {a["shard_nodes"][s] for s in shards} == {a["train_nodes"][worker]}


def test_train_workers_in_a_spread_placement_group_on_two_nodes(report):
    pg = report["pg"]
    assert pg["strategy"] == "SPREAD"
    assert len(set(pg["bundle_nodes"])) == 2
    assert sorted(pg["bundle_nodes"]) == sorted(report["affinity"]["train_nodes"])
    assert report["pg_left"] == []  # closing the run removed the placement group


def test_two_train_workers_on_two_nodes_train_to_identical_weights(report):
    dp = report["dp"]
    assert dp["iterations"] == 1
    assert len(dp["checksums"]) == 2
    assert dp["checksums"][0] == dp["checksums"][1]


def test_a_lost_node_relaunches_its_env_workers_and_shards_on_surviving_nodes(report):
    loss = report["node_loss"]
    victim = loss["victim"]
    before, after = loss["before"], loss["after"]
    assert victim in before["env_nodes"].values() and victim in before["shard_nodes"]
    assert victim not in after["env_nodes"].values()
    assert victim not in after["shard_nodes"]
    lost_env = [e for e, n in before["env_nodes"].items() if n == victim]
    assert [s["shard"] for s in loss["lost_shards"]] == [before["shard_nodes"].index(victim)]
    assert loss["lost_shards"][0]["env_ids"] == lost_env
    assert loss["env_restarts"]["env_restarts"] == len(lost_env)
    assert loss["env_restarts"]["storage_restarts"] == 1
    assert loss["iterations"] == 3  # the run went on: two more iterations after the loss
    assert loss["env_steps"][1] > loss["env_steps"][0]
