"""Atomic checkpoints, pruning, incomplete folders and resume (issue 33)."""

import json
import logging

import pytest

from rlightning.engine.checkpoint import FORMAT_VERSION
from rlightning.engine.checkpoint_store import list_checkpoints, newest_checkpoint, prune_checkpoints
from tests.support.configs import small_ppo

RESUMABLE = ["train.checkpoint_interval=1", "train.checkpoint_resets_envs=true", "seed=3", "train.iterations=4"]
TIMED = ("time", "per_sec", "_s", "latency")


def _untimed(rows):
    return [{k: v for k, v in row.items() if not any(t in k for t in TIMED)} for row in rows]


def small_dqn(tmp_path, *extra):
    """cartpole_dqn shrunk to a fraction of a second per iteration (epsilon still decaying, target syncs)."""
    from rlightning.utils.config import apply_overrides, load_preset
    from tests.support.configs import LOCAL

    shrink = ["train.rollout_steps=32", "train.learning_starts=32", "train.updates_per_iteration=4"]
    shrink += ["train.batch_size=16", "train.total_env_steps=null", "log.progress=false", f"log.run_dir={tmp_path}"]
    return apply_overrides(load_preset("cartpole_dqn"), [*shrink, *LOCAL, *extra])


def _sac(tmp_path, *extra):
    from tests.support.configs import small_sac

    return small_sac(tmp_path, False, "train.updates_per_iteration=8", *extra)


RUNS = {
    # algorithm: (config, iterations, interrupted after, a metric its training reports)
    "ppo": (lambda tmp, *extra: small_ppo(tmp, False, *extra), 4, 2, "value_loss"),
    # Off-policy: the replay (checkpoint_buffer) and its priorities, the samplers', acting workers' and exploration
    # generators, the epsilon schedule's rows and the target-sync marks all carry over (DQN diverged 5 iterations
    # after a resume while the eval worker's answered rows were not kept; prioritized replay at the first update).
    "dqn": (lambda tmp, *extra: small_dqn(tmp, "buffer.sampler=prioritized", *extra), 8, 3, "q_loss"),
    "sac": (_sac, 4, 2, "alpha_loss"),
}


@pytest.mark.slow
@pytest.mark.parametrize("algo", sorted(RUNS))
def test_a_resumed_seeded_run_repeats_the_uninterrupted_one(tmp_path, build, algo):
    make, iterations, cut_at, trained = RUNS[algo]
    args = [*RESUMABLE, f"train.iterations={iterations}", "train.checkpoint_buffer=true"]
    full = build(make(tmp_path, *args, "log.name=full")).engine.run()
    first = build(make(tmp_path, *args, "log.name=cut")).engine
    first.run(iterations=cut_at)
    first.close()
    resumed = build(make(tmp_path, *args, "log.name=cut")).engine
    assert resumed.resume(str(tmp_path / "cut")).name == f"iter_{cut_at:06d}"
    assert (resumed.iteration, resumed.episodes) == (cut_at, first.episodes)
    resumed.run()
    assert resumed.iteration == iterations
    assert len(full) == iterations and trained in full[-1]
    assert _untimed(resumed.metrics.history) == _untimed(full)


def test_checkpoints_are_atomic_pruned_and_incomplete_ones_skipped(tmp_path, build, caplog):
    cfg = small_ppo(tmp_path, False, "train.checkpoint_interval=1", "train.keep_checkpoints=2", "log.name=r")
    engine = build(cfg).engine
    engine.run(iterations=3)
    folder = tmp_path / "r" / "checkpoints"
    assert sorted(p.name for p in folder.iterdir()) == ["iter_000002", "iter_000003"]
    assert all(c.complete for c in list_checkpoints(tmp_path / "r", FORMAT_VERSION))

    def broken(path):
        (tmp_path / "half").write_text("x")
        raise OSError("disk full")

    engine.policy_group.save_checkpoint = broken
    with pytest.raises(OSError, match="disk full"):
        engine.save(folder / "iter_000009")
    assert sorted(p.name for p in folder.iterdir()) == ["iter_000002", "iter_000003"]  # absent, no leftovers

    (folder / "iter_000003" / "engine.json").unlink()
    with caplog.at_level(logging.WARNING):
        newest = newest_checkpoint(tmp_path / "r", FORMAT_VERSION)
    assert newest.path.name == "iter_000002"
    assert "iter_000003 is incomplete (no engine.json); skipped" in caplog.text
    policy = folder / "iter_000002" / "policy.pt"
    policy.write_bytes(policy.read_bytes()[:-10])
    status = list_checkpoints(folder, FORMAT_VERSION)[0]
    assert not status.complete and "policy.pt has" in status.reason
    with pytest.raises(FileNotFoundError, match="holds no complete checkpoint"):
        engine.resume(str(tmp_path / "r"))


def _fake_checkpoint(folder, iteration, eval_return=None, version=FORMAT_VERSION):
    path = folder / f"iter_{iteration:06d}"
    path.mkdir(parents=True)
    (path / "policy.pt").write_bytes(b"w" * iteration)
    state = {"format_version": version, "iteration": iteration, "eval_return": eval_return}
    state["files"] = {"policy.pt": iteration}
    (path / "engine.json").write_text(json.dumps(state))
    return path


def test_pruning_keeps_the_newest_and_the_best_by_eval_return(tmp_path):
    folder = tmp_path / "checkpoints"
    for it, ret in [(1, 10.0), (2, 50.0), (3, 20.0), (4, None), (5, 30.0)]:
        _fake_checkpoint(folder, it, ret)
    old = _fake_checkpoint(folder, 6, version=1)
    (folder / ".iter_000007.tmp-abc").mkdir()  # left by a writer killed mid-save
    removed = prune_checkpoints(tmp_path, 2, FORMAT_VERSION, keep_best=True)
    assert {p.name for p in removed} == {"iter_000001", "iter_000003", ".iter_000007.tmp-abc"}
    assert sorted(p.name for p in folder.iterdir()) == ["iter_000002", "iter_000004", "iter_000005", old.name]
    assert newest_checkpoint(tmp_path, FORMAT_VERSION).iteration == 5  # the older format is skipped
    assert "format version 1" in list_checkpoints(tmp_path, FORMAT_VERSION)[-1].reason


def test_periodic_checkpoints_keep_the_replay_buffer_when_asked(tmp_path, build):
    from tests.support.configs import small_sac

    cfg = small_sac(tmp_path, False, "train.checkpoint_interval=1", "train.checkpoint_buffer=true", "log.name=sac")
    engine = build(cfg).engine
    engine.run(iterations=2)
    size = engine.buffer.stats()["size"]
    assert size > 0 and (tmp_path / "sac" / "checkpoints" / "iter_000002" / "buffer.pt").is_file()
    resumed = build(cfg).engine
    resumed.resume(str(tmp_path / "sac"))
    assert resumed.buffer.stats()["size"] == size and resumed.iteration == 2


@pytest.mark.ray
def test_ray_policy_workers_generators_are_saved_and_restored(tmp_path, ray_runtime, build):
    import torch

    ray_eval = ["cluster.remote_eval=true", "cluster.inference=eval_workers", "cluster.eval_each_cpu_num=0.25"]
    cfg = small_ppo(tmp_path, False, *ray_eval, "env.num_workers=1", "train.checkpoint_interval=1", "log.name=ray")
    engine = build(cfg).engine
    engine.run(iterations=1)
    checkpoint = tmp_path / "ray" / "checkpoints" / "iter_000001"
    saved = torch.load(checkpoint / "workers_rng.pt", weights_only=True)
    (want,), (train,) = saved["eval"], saved["train"]
    assert "process" in want and "process" not in train  # the driver's own generators are in rng.pt
    handle = engine.policy_group.eval_workers[0]
    assert handle.is_remote
    engine.step()  # the eval worker acts on: its draws and answered rows move on
    moved = handle.call("rng_state", True)
    assert want["rollout_rows"] > 0 and moved["rollout_rows"] > want["rollout_rows"]
    assert moved["np_rng"] != want["np_rng"]
    engine.load(str(checkpoint))
    got = handle.call("rng_state", True)
    assert got["np_rng"] == want["np_rng"] and got["rollout_rows"] == want["rollout_rows"]
    for key in ("torch", "numpy_keys", "python"):  # the Ray process's own generators
        assert torch.equal(got["process"][key], want["process"][key]), key
