import time

import pytest

from rlightning.notebook import Lab
from tests.support.configs import small_ppo


@pytest.fixture
def lab(ray_runtime):
    lab = Lab.local()
    yield lab
    lab.shutdown()


@pytest.mark.ray
def test_build_step_run_and_rebuild_replaces(tmp_path, lab):
    run = lab.build(small_ppo(tmp_path))
    assert run.step()["iteration"] == 1
    assert len(run.run(2, progress=False)) == 2
    assert len(run.metrics) == 3 and len(run.timing.records) == 3
    ckpt = run.save(str(tmp_path / "ckpt"))
    again = lab.build(small_ppo(tmp_path))  # the same cell run again
    assert run._closed and not again._closed
    assert lab.cluster_info()["runs"] == ["default"]
    assert "iteration=0" in repr(again)
    assert again.load(str(ckpt)) is again and again.engine.iteration == 3 and len(again.metrics) == 3


@pytest.mark.ray
def test_background_run_start_stop(tmp_path, lab):
    run = lab.build(small_ppo(tmp_path, False, "train.iterations=200"))
    run.start()
    assert run.is_running
    with pytest.raises(RuntimeError, match="is running in the background; call run.stop\\(\\) first"):
        run.step()
    deadline = time.time() + 60
    while run.engine.iteration < 2 and time.time() < deadline:
        time.sleep(0.05)
    history = run.stop()
    assert not run.is_running
    assert 2 <= len(history) < 200
    assert run.engine.phase == "idle"
    assert run.step()["iteration"] == len(history) + 1


@pytest.mark.ray
def test_shutdown_stops_what_the_lab_built(tmp_path, lab):
    run = lab.build(small_ppo(tmp_path), name="a")
    lab.shutdown()
    assert run._closed
    with pytest.raises(RuntimeError, match="run 'a' is closed"):
        run.step()


@pytest.mark.ray
def test_run_set_reaches_a_ray_train_worker_and_the_metrics(tmp_path, lab):
    cfg = small_ppo(tmp_path, False, "cluster.remote_train=true", "cluster.train_each_cpu_num=0.25")
    cfg.policy.optim.anneal_lr = False
    run = lab.build(cfg)
    assert run.policy_group.train_workers[0].is_remote
    assert run.step()["lr"] == pytest.approx(cfg.policy.optim.lr)
    assert run.set(lr=2e-4, clip_coef=0.15) == {"lr": 2e-4, "clip_coef": 0.15}
    metrics = run.step()
    assert metrics["lr"] == pytest.approx(2e-4), "the Ray train worker trained with the new learning rate"
    assert metrics["set_lr"] == 2e-4 and metrics["set_clip_coef"] == 0.15
    assert run.config.policy.optim.lr == 2e-4
    with pytest.raises(KeyError, match="'update_epoch' cannot be changed on a built run; settable: .*ent_coef"):
        run.set(update_epoch=2)


@pytest.mark.ray
def test_build_that_cannot_get_its_cpus_fails_at_once(tmp_path, lab):
    import ray

    free = float(ray.available_resources().get("CPU", 0))
    per_worker = int(free / 2 * 100) / 100
    hungry = [f"env.num_cpus={per_worker}", "cluster.remote_env=true"]
    first = lab.build(small_ppo(tmp_path, False, *hungry), name="first")
    assert first.engine.iteration == 0
    with pytest.raises(
        ValueError,
        match=r"run 'second' needs [\d.]+ CPUs for its Ray actors \(2 env workers x "
        r"[\d.]+\) but only [\d.]+ of the cluster's [\d.]+ are free \(runs of this Lab: 'first' holds",
    ):
        lab.build(small_ppo(tmp_path, False, *hungry), name="second")
    assert sorted(lab.runs) == ["first"], "nothing of the failed build was kept"
    lab._require_free(small_ppo(tmp_path, False, *hungry), "first")  # replacing 'first' gets its CPUs back


@pytest.mark.ray
def test_bad_env_id_is_caught_before_any_worker_starts(tmp_path, lab, monkeypatch):
    import rlightning.utils.builders as builders

    def no_build(*args, **kwargs):
        raise AssertionError("build_run was reached")

    monkeypatch.setattr(builders, "build_run", no_build)
    from rlightning.utils.config import UnknownNameError

    with pytest.raises(UnknownNameError, match=r"env.name: unknown env id 'CartPol-v1'.*'CartPole-v1'") as info:
        lab.build(small_ppo(tmp_path, False, "env.name=CartPol-v1"))
    assert info.value.__cause__ is None and info.value.__suppress_context__


def test_ray_start_up_lines_go_to_the_rlightning_logger(caplog):
    import logging

    from rlightning.utils.ray.runtime import ray_messages_to_logger

    ray_logger = logging.getLogger("ray")
    before = list(ray_logger.handlers)
    with caplog.at_level(logging.INFO, logger="rlightning"), ray_messages_to_logger():
        logging.getLogger("ray._private.worker").info("Started a local Ray instance.")
        logging.getLogger("ray._private.authentication").warning("Token authentication is enabled")
    assert ray_logger.handlers == before, "Ray's own handlers are back after the start"
    got = [(r.name, r.levelname, r.getMessage()) for r in caplog.records]
    assert ("rlightning.utils.ray.runtime", "INFO", "ray: Started a local Ray instance.") in got
    assert ("rlightning.utils.ray.runtime", "INFO", "ray: Token authentication is enabled") in got


def test_user_errors_are_shown_as_one_message(capsys):
    from IPython.testing.globalipapp import get_ipython

    from rlightning.notebook.errors import install_short_errors

    shell = get_ipython()
    assert install_short_errors()
    shell.run_cell(
        "from rlightning.utils.config import load_preset\ncfg = load_preset('cartpole_ppo')\n"
        "cfg.train.rollout_step = 3",
        store_history=True,
    )
    result = shell.last_execution_result
    assert not result.success and type(result.error_in_exec).__name__ == "UnknownKeyError"  # the cell failed
    shown = capsys.readouterr()
    shown = shown.out + shown.err
    assert "UnknownKeyError" in shown and "rollout_steps" in shown and "%tb shows the full traceback" in shown
    assert "Traceback" not in shown and "site-packages" not in shown
    shell.set_custom_exc((), None)


def test_notebook_runs_write_under_a_temp_dir_not_the_working_dir(monkeypatch, tmp_path):
    from rlightning.notebook.lab import notebook_run_dir

    monkeypatch.delenv("RLIGHTNING_RUN_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    assert not str(notebook_run_dir()).startswith(str(tmp_path)) and notebook_run_dir().name == "runs"
    monkeypatch.setenv("RLIGHTNING_RUN_DIR", str(tmp_path / "mine"))
    assert notebook_run_dir() == tmp_path / "mine"


@pytest.mark.ray
def test_lab_build_default_run_dir_metrics_df_and_compare(tmp_path, lab, monkeypatch):
    from rlightning.utils.config import apply_overrides, load_preset

    monkeypatch.setenv("RLIGHTNING_RUN_DIR", str(tmp_path / "nb-runs"))
    monkeypatch.chdir(tmp_path)
    cfg = apply_overrides(
        load_preset("cartpole_ppo"),
        [
            "env.num_workers=1",
            "env.num_envs=4",
            "train.rollout_steps=32",
            "log.progress=false",
            "cluster.remote_env=false",
        ],
    )
    a = lab.build(cfg, name="a")
    b = lab.build(cfg, name="b")
    assert str(a.engine.run_dir).startswith(str(tmp_path / "nb-runs"))
    a.run(iterations=2)
    b.step()
    assert not (tmp_path / "runs").exists(), "nothing is written into the working directory"
    df = a.metrics_df()
    assert list(df["iteration"]) == [1, 2] and "episode_return_mean" in df.columns
    view = lab.compare(a, b, live=False)
    assert [r["name"] for r in view.state["runs"]] == ["a", "b"] and view.png[:4] == b"\x89PNG"
    assert [r["iteration"] for r in view.state["runs"]] == [2, 1]
    with pytest.raises(TypeError, match="compare\\(\\) takes Run objects"):
        lab.compare(a, "b")


def test_tensorboard_extra_writes_event_files_that_read_back(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlightning.notebook.run import Run
    from rlightning.utils.builders import build_run

    parts = build_run(small_ppo(tmp_path, False, "log.tensorboard=true", "log.name=tb-run"))
    run = Run("tb", parts.engine.config, parts)
    try:
        run.run(iterations=2)
        steps = [m["env_steps"] for m in run.metrics]
        losses = [m["policy_loss"] for m in run.metrics]
        assert not run.closed
    finally:
        run.close()
    assert run.closed
    events = EventAccumulator(str(tmp_path / "tb-run" / "tb"))
    events.Reload()
    scalars = events.Scalars("policy_loss")
    assert [s.step for s in scalars] == steps
    assert [s.value for s in scalars] == pytest.approx(losses, rel=1e-6)
    assert "episode_return_mean" in events.Tags()["scalars"]


def test_a_missing_optional_logger_names_the_extra_before_anything_is_built(tmp_path, monkeypatch, caplog):
    import sys

    from rlightning.engine.metrics import MetricsLog
    from rlightning.utils.config import ConfigError
    from rlightning.utils.validate import validate_config

    loaded = [m for m in sys.modules if m == "tensorboard" or m.startswith(("tensorboard.", "torch.utils.tensorboard"))]
    for name in loaded:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # `import tensorboard` raises ImportError
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)
    cfg = small_ppo(tmp_path, False, "log.tensorboard=true")
    hint = r'needs the .tensorboard. package, which is not installed: pip install "rlightning\[tensorboard\]"'
    with pytest.raises(ConfigError, match=r"log.tensorboard=true " + hint + r" \(or set log.tensorboard=false\)"):
        validate_config(cfg)
    cfg.log.tensorboard = False
    validate_config(cfg)  # without it the config is fine
    with caplog.at_level("WARNING", logger="rlightning"):
        log = MetricsLog(tmp_path / "direct", tensorboard=True)  # built directly: a warning naming the extra
    log.close()
    assert any('pip install "rlightning[tensorboard]"' in r.getMessage() for r in caplog.records)


README_SECOND_BUILD = """
from rlightning.notebook import Lab, ResourceError
from rlightning.utils.config import load_preset
lab = Lab.local(num_cpus=2)
cfg = load_preset("cartpole_ppo")
cfg.log.run_dir = {run_dir!r}
run = lab.build(cfg)
try:
    lab.build(load_preset("cartpole_ppo"), name="second")
except ResourceError as err:
    print("RESOURCE-ERROR:", err)
run.step()
print("FIRST-RUN-STEPPED", run.engine.iteration)
lab.shutdown()
"""


@pytest.mark.ray
@pytest.mark.slow
def test_readme_second_build_on_two_cpus_fails_at_once_naming_the_cpus(tmp_path):
    import subprocess
    import sys

    script = README_SECOND_BUILD.format(run_dir=str(tmp_path / "runs"))
    env = {k: v for k, v in __import__("os").environ.items() if k != "RAY_ADDRESS"}
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path, env=env
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (
        "RESOURCE-ERROR: run 'second' needs 2 CPUs for its Ray actors (2 env workers x 1) but only 0 of the "
        "cluster's 2 are free (runs of this Lab: 'default' holds 2)" in out.stdout
    ), out.stdout
    assert "FIRST-RUN-STEPPED 1" in out.stdout, "the first run is untouched by the failed build"
    assert "Started a local Ray instance" not in out.stderr and "Token authentication" not in out.stderr
