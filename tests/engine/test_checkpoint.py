import json
import os
import pickle
import subprocess
import sys

import pytest
import torch

from rlightning.engine.checkpoint import CheckpointError, load_engine_files
from tests.support.configs import small_ppo


def test_save_and_load_continue_counters_and_curve(tmp_path, build):
    cfg = small_ppo(tmp_path)
    e = build(cfg).engine
    e.run(iterations=2)
    path = e.save(tmp_path / "ckpt")
    assert {"engine.json", "config.yaml", "policy.pt", "rng.pt"} <= {p.name for p in path.iterdir()}
    returns = [m.get("episode_return_mean") for m in e.metrics.history]
    version = e.policy_group.weight_version

    e2 = build(cfg).engine
    e2.load(str(path))
    assert (e2.iteration, e2.env_steps) == (2, e.env_steps)
    assert [m.get("episode_return_mean") for m in e2.metrics.history] == returns
    assert e2.policy_group.weight_version >= version
    e2.step()
    assert e2.iteration == 3 and e2.env_steps == e.env_steps + 256
    assert len(e2.metrics.history) == 3


def test_buffer_can_be_checkpointed(tmp_path, build):
    cfg = small_ppo(tmp_path, False, "buffer.type=replay", "buffer.sampler=uniform", "train.batch_size=32")
    e = build(cfg).engine
    e.rollout()
    size = e.buffer.stats()["size"]
    assert size > 0
    path = e.save(tmp_path / "ckpt", include_buffer=True)
    assert (path / "buffer.pt").is_file()
    e2 = build(cfg).engine
    e2.load(str(path))
    assert e2.buffer.stats()["size"] == size


class _Evil:
    def __reduce__(self):
        return (os.system, ("touch " + os.environ["RL_EVIL_MARKER"],))


def test_crafted_checkpoint_cannot_run_code(tmp_path, build, monkeypatch):
    cfg = small_ppo(tmp_path)
    e = build(cfg).engine
    path = e.save(tmp_path / "ckpt")
    marker = tmp_path / "pwned"
    monkeypatch.setenv("RL_EVIL_MARKER", str(marker))
    with open(path / "policy.pt", "wb") as f:
        pickle.dump({"weights": _Evil()}, f)
    with pytest.raises(Exception, match="(?i)weights_only|unpickl|unsupported"):
        e.load(str(path))
    assert not marker.exists()
    torch.save({"x": _Evil()}, path / "rng.pt")
    with pytest.raises(Exception, match="(?i)weights_only|unpickl|unsupported"):
        load_engine_files(path)
    assert not marker.exists()


def test_invalid_checkpoint_files_are_named(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine
    path = e.save(tmp_path / "ckpt")
    state = json.loads((path / "engine.json").read_text())
    state["iteration"] = "3; rm -rf /"
    (path / "engine.json").write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match="engine.json field 'iteration' must be int"):
        load_engine_files(path)
    (path / "engine.json").unlink()
    with pytest.raises(CheckpointError, match="has no engine.json"):
        load_engine_files(path)


def test_checkpoint_config_is_validated(tmp_path, build):
    e = build(small_ppo(tmp_path)).engine
    path = e.save(tmp_path / "ckpt")
    (path / "config.yaml").write_text("engine: syncrl\nclustr: {}\n")
    with pytest.raises(CheckpointError, match="unknown MainConfig key 'clustr'"):
        load_engine_files(path)
    (path / "config.yaml").write_text("!!python/object/apply:os.system ['true']\n")
    with pytest.raises(CheckpointError, match="not valid YAML"):
        load_engine_files(path)


KILLED_RUN = """
import os, signal, sys
from rlightning.utils.builders import build_run
from tests.support.configs import small_ppo
from pathlib import Path
cfg = small_ppo(Path(sys.argv[1]), False, "train.checkpoint_interval=2", "log.name=killed")
engine = build_run(cfg).engine
engine.run(iterations=2)
print("saved", engine.last_checkpoint, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
def test_kill_then_resume(tmp_path, build):
    out = subprocess.run([sys.executable, "-c", KILLED_RUN, str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert out.returncode == -9, out.stderr[-2000:]
    ckpt = tmp_path / "killed" / "checkpoints" / "iter_000002"
    assert ckpt.is_dir()
    state, cfg = load_engine_files(ckpt)
    assert state["iteration"] == 2
    e = build(cfg).engine
    e.load(str(ckpt))
    curve = [m["episode_return_mean"] for m in e.metrics.history]
    assert len(curve) == 2
    m = e.step()
    assert m["iteration"] == 3 and m["env_steps"] == 3 * 256
    assert [r.get("episode_return_mean") for r in e.metrics.history][:2] == curve
