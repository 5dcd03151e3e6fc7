import subprocess
import sys
from pathlib import Path

import pytest

from rlightning.cli import main

TINY = [
    "env.num_workers=1",
    "env.num_envs=4",
    "train.rollout_steps=16",
    "train.iterations=2",
    "cluster.remote_env=false",
]


def test_help_from_the_console_script():
    exe = Path(sys.executable).with_name("rlightning")
    out = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "train" in out.stdout and "presets" in out.stdout


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "usage: rlightning" in capsys.readouterr().out


def test_presets(capsys):
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert "cartpole_ppo" in out and "pendulum_sac" in out and "Pendulum-v1" in out


def test_config_with_overrides(capsys):
    assert main(["config", "cartpole_ppo", "train.iterations=7"]) == 0
    assert "iterations: 7" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["config", "cartpole_pp"], "unknown preset 'cartpole_pp'. Did you mean 'cartpole_ppo'?"),
        (["config", "cartpole_ppo", "train.iteratons=3"], "Did you mean 'iterations'?"),
        (["config", "cartpole_ppo", "notakeyvalue"], "must look like key.path=value"),
        (["config", "missing.yaml"], "config file 'missing.yaml' does not exist"),
        (["train", "cartpole_ppo", "engine=nope"], "unknown engine 'nope'"),
        (["eval", "/nonexistent/ckpt"], "has no engine.json"),
        (["eval", "x", "--episodes", "0"], "--episodes must be >= 1"),
    ],
)
def test_bad_input_exits_2_with_a_message(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_subcommand_is_usage_error():
    with pytest.raises(SystemExit) as exc:
        main(["fly"])
    assert exc.value.code == 2


def test_train_then_eval(tmp_path, capsys):
    assert main(["train", "cartpole_ppo", *TINY, "--run-dir", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "iterations      2" in out and "checkpoint" in out
    ckpts = list(tmp_path.glob("*/checkpoints/iter_000002"))
    assert len(ckpts) == 1
    assert main(["eval", str(ckpts[0]), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "episodes        2" in out and "return" in out


def test_train_prints_each_iterations_metrics_as_a_line_for_ray_jobs(tmp_path, capsys):
    import json
    import signal

    before = signal.getsignal(signal.SIGTERM)
    assert main(["train", "cartpole_ppo", *TINY, "--run-dir", str(tmp_path), "--quiet", "--metrics-lines"]) == 0
    assert signal.getsignal(signal.SIGTERM) is before  # a stopped job's SIGTERM handler is only set while training
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("rlightning-metrics ")]
    rows = [json.loads(line.split(" ", 1)[1]) for line in lines]
    assert [r["iteration"] for r in rows] == [1, 2] and rows[1]["env_steps"] > rows[0]["env_steps"]


def test_yaml_config_file(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    assert main(["config", "cartpole_ppo", *TINY]) == 0
    cfg.write_text(capsys.readouterr().out)
    assert main(["config", str(cfg)]) == 0
    assert "num_envs: 4" in capsys.readouterr().out
