"""Issue 37: sweeps as Ray Tune trials on the session runtime (ASHA, PBT, a failing trial, seeds)."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rlightning.notebook import Lab
from rlightning.notebook.errors import ResourceError
from rlightning.notebook.stats import aggregates, curve_band, final_scores
from tests.support.configs import small_ppo

pytestmark = [pytest.mark.ray, pytest.mark.slow]

FLAKY = "tests.support.env_flaky:Flaky-v0"  # importing the module registers Flaky-v0


@pytest.fixture(scope="module", autouse=True)
def mlflow_server(tmp_path_factory):
    """A real `mlflow server` on a loopback port, started with the module (it takes seconds to come up)."""
    from tests.support.tracking import MlflowServer

    server = MlflowServer(tmp_path_factory.mktemp("mlflow"))
    yield server
    server.stop()


@pytest.fixture
def lab(ray_runtime):
    lab = Lab.local()
    yield lab
    lab.shutdown()


def test_asha_stops_bad_trials_early_and_best_config_is_the_best_trial(lab, tmp_path):
    cfg = small_ppo(tmp_path, False, "env.num_workers=1", "env.num_envs=2")
    lrs = [1e-5, 1e-4, 3e-3, 1e-2]
    exp = lab.sweep(
        cfg,
        {"policy.optim.lr": lrs},
        scheduler="asha",
        stop={"iterations": 6},  # rungs at 2 and 4 (iteration 1 is the same for all: one seed, no update yet)
        scheduler_options={"grace_period": 2, "reduction_factor": 2},
        max_concurrent=2,  # two trial processes, each reused for a second trial
        name="asha",
    )
    exp.wait(timeout=300)
    df = exp.results_df()
    assert sorted(df["policy.optim.lr"]) == lrs and set(df["status"]) == {"TERMINATED"}
    assert (df["iterations"] < 6).any() and (df["iterations"] == 6).any()  # ASHA stopped some early
    best = df.set_index("trial_id").loc[exp.best_trial()]  # (trials stopped at a rung may tie)
    assert best["last"] == df["last"].max()
    assert exp.best_config().policy.optim.lr == best["policy.optim.lr"]
    assert exp.best_config().train.rollout_steps == cfg.train.rollout_steps  # the base config, with its value
    assert (exp.best_checkpoint() / "policy.pt").is_file()
    for curve in exp.curves().values():  # every iteration reported
        assert list(curve["iteration"]) == list(range(1, len(curve) + 1))


def test_pbt_exploits_restore_the_donors_weights(lab, tmp_path):
    # Env workers are Ray actors (half a CPU each) placed in their trial's placement group.
    cfg = small_ppo(tmp_path, False, "env.num_workers=1", "cluster.remote_env=true", "env.num_cpus=0.5")
    exp = lab.sweep(
        cfg,
        {"policy.optim.lr": [1e-6, 3e-3]},
        scheduler="pbt",
        stop={"iterations": 3},
        # synchronous PBT: at iteration 2 the worse of the two trials continues from the better one's checkpoint
        scheduler_options={"perturbation_interval": 2, "quantile_fraction": 0.5, "synch": True},
        name="pbt",
    )
    exp.wait(timeout=300)
    exploits = exp.exploits()
    assert exploits, exp.results_df()
    ids = set(exp.results_df()["trial_id"])
    for e in exploits:
        assert e["trial_id"] in ids and e["donor"] in ids and e["donor"] != e["trial_id"]
        assert e["loaded_digest"] == e["donor_digest"]  # the weights the exploiting trial goes on from
        assert e["donor_iteration"] == 2
    for curve in exp.curves().values():  # every iteration reported; the env worker sat in the trial's group
        assert list(curve["training_iteration"]) == list(range(1, len(curve) + 1))
        assert set(curve["actors_in_trial_group"]) == {1}


def test_a_trial_that_raises_is_reported_while_the_others_finish(lab, tmp_path):
    cfg = small_ppo(tmp_path, False, "env.num_workers=1", f"env.name={FLAKY}", "env.max_restarts=0")
    space = {"env.env_kwargs": [{"fail_every": 0}, {"fail_every": 40}]}
    # One at a time: the good trial's process is reused for the failing one (a failed trial's is not).
    exp = lab.sweep(cfg, space, stop={"iterations": 3}, max_failures=1, max_concurrent=1)  # retried once, reported
    df = exp.wait(timeout=300).results_df().set_index("status")
    assert sorted(df.index) == ["ERROR", "TERMINATED"]
    assert df.loc["TERMINATED", "iterations"] == 3 and pd.isna(df.loc["TERMINATED", "error"])
    assert df.loc["ERROR", "retries"] == 1 and df.loc["TERMINATED", "retries"] == 0
    assert "simulator crashed" in df.loc["ERROR", "error"]
    from rlightning.widgets.experiment import ExperimentView

    view = ExperimentView(exp, live=False)  # the sweep widget, headless: table, curves, buttons
    assert [r["status"] for r in view.state["trials"]].count("ERROR") == 1 and view.state["running"] is False
    assert "simulator crashed" in view.table.value and "env.env_kwargs" in view.table.value
    assert view.curves.value and view.stop_button.disabled and view.stop_trial_button.disabled


def test_seeds_aggregates_equal_rliables_and_each_trial_is_one_mlflow_and_one_wandb_run(lab, tmp_path, mlflow_server):
    from mlflow.tracking import MlflowClient

    from tests.notebook.test_sweep import rliable_estimates
    from tests.support.tracking import history_of, read_wandb_run

    uri = mlflow_server.wait()  # started with the module: up by now
    tracking = ["log.mlflow=true", f"log.mlflow_uri={uri}", "log.wandb=true", "log.wandb_mode=offline"]
    cfg = small_ppo(tmp_path, False, "env.num_workers=1", *tracking)
    # One trial process for the three seeds (reused): each trial is still its own MLflow and W&B run.
    exp = lab.seeds(cfg, seeds=3, stop={"iterations": 3}, name="seeds", max_concurrent=1).wait(timeout=300)
    df = exp.results_df().set_index("trial_id")
    assert sorted(df["seed"]) == [cfg.seed, cfg.seed + 1, cfg.seed + 2] and set(df["iterations"]) == {3}
    assert len({int(c["pid"].iloc[0]) for c in exp.curves().values()}) == 1  # Tune reused the trial actor
    scores = final_scores(exp)
    assert list(scores) == ["config"] and np.allclose(np.sort(scores["config"]), np.sort(df["last"]))
    table = aggregates(scores, reps=200, seed=3)
    from rliable import metrics

    def fn(x):
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_median(x), metrics.aggregate_iqm(x)])

    finals = np.asarray(scores["config"])[:, None]
    points, intervals = rliable_estimates({"config": finals}, fn, reps=200, seed=3)  # rliable on the same numbers
    assert list(table.loc["config", ["mean", "median", "iqm"]]) == pytest.approx(list(points["config"]))
    assert list(table.loc["config", ["mean_lo", "median_lo", "iqm_lo"]]) == pytest.approx(list(intervals["config"][0]))
    assert table.loc["config", "mean"] == pytest.approx(df["last"].mean())
    band = curve_band(exp, points=10, reps=200)
    assert len(band) == 10 and (band["lo"] <= band["mean"] + 1e-9).all() and (band["mean"] <= band["hi"] + 1e-9).all()
    from rlightning.widgets.experiment import ExperimentView

    view = ExperimentView(exp, live=False)  # over seeds: one mean curve per config with its band
    assert view.by_config and view.curves_png == view._band_png and view.curves_png[:4] == b"\x89PNG"

    # MLflow: one run per trial in the sweep's experiment, on the server; params are the config's dotted paths.
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("seeds")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == set(df.index)
    for trial_id, run in runs.items():
        assert run.info.status == "FINISHED" and run.data.params["seed"] == str(df.loc[trial_id, "seed"])
        assert run.data.params["policy.optim.lr"] == str(cfg.policy.optim.lr)
        history = client.get_metric_history(run.info.run_id, "episode_return_mean")
        assert len(history) == 3 and history[-1].value == pytest.approx(df.loc[trial_id, "last"])
        assert [m.step for m in history] == sorted(m.step for m in history)  # at env steps

    # W&B (offline): one run per trial, grouped by the sweep, its files under the trial's run folder.
    for trial_id in df.index:
        (folder,) = exp.path.glob(f"*/{trial_id}")
        run = read_wandb_run(folder)
        assert (run["group"], run["name"], run["project"]) == ("seeds", trial_id, "rlightning")
        assert run["config"]["seed"] == df.loc[trial_id, "seed"] and run.get("exit_code", 0) == 0
        assert history_of(run, "episode_return_mean")[-1] == pytest.approx(df.loc[trial_id, "last"])
        assert history_of(run, "iteration") == [1, 2, 3]


KILLED_DRIVER = """
import os, sys, time
import ray
from rlightning.utils.ray.runtime import _loopback_allowed
with _loopback_allowed("127.0.0.1"):  # join the test's loopback-only runtime at its loopback address
    ray.init(address=sys.argv[1], _node_ip_address="127.0.0.1", log_to_driver=False)
from rlightning.notebook.sweep import start_sweep
from tests.support.configs import small_ppo
from tests.notebook.test_sweep_tune import killed_sweep
cfg, space = killed_sweep(sys.argv[2])
exp = start_sweep(cfg, space, stop={"iterations": 2}, max_concurrent=1, name="killed")
deadline = time.monotonic() + 600
while time.monotonic() < deadline:  # Tune's saved state says the first trial finished: die mid-sweep
    states = [p.read_text() for p in exp.path.glob("experiment_state-*.json")]
    if any("TERMINATED" in s for s in states):
        print("killing at", sorted(exp.trials().items()), flush=True)
        os.kill(os.getpid(), 9)
    time.sleep(0.2)
sys.exit("the first trial never finished")
"""


def killed_sweep(folder):
    """The killed sweep's config and space: its second trial hangs in its second iteration, the first time
    only (so the driver dies with it running; the resumed sweep runs it through)."""
    cfg = small_ppo(folder, False, "env.num_workers=1", "env.num_envs=2", "train.rollout_steps=16", f"env.name={FLAKY}")
    return cfg, {"env.env_kwargs": [{}, {"hang_at": 20, "log_path": str(Path(folder) / "hang.log")}]}


def test_a_killed_sweep_resumes_without_running_finished_trials(lab, ray_runtime, tmp_path):
    import json
    import os
    import subprocess
    import sys

    address = ray_runtime.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2]), "TUNE_GLOBAL_CHECKPOINT_S": "0.5"}
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_DRIVER, address, str(tmp_path)], env=env, capture_output=True, text=True,
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stdout + proc.stderr[-3000:]
    folder = tmp_path / "sweeps" / "killed"
    (state,) = folder.glob("experiment_state-*.json")
    trials = [json.loads(t) for t, _ in json.loads(state.read_text())["trial_data"]]
    (done,) = [t["trial_id"] for t in trials if t["status"] == "TERMINATED"]  # the one Tune saw finish
    (finished,) = folder.glob(f"*/{done}/metrics.jsonl")
    assert len(finished.read_text().splitlines()) == 2
    before = finished.read_bytes()  # (Tune may still copy the killed trial's files over: same bytes)
    assert (tmp_path / "hang.log.hang").exists()  # the second trial hung: it ran when the driver died
    cfg, space = killed_sweep(tmp_path)
    exp = lab.sweep(cfg, space, stop={"iterations": 2}, name="killed", resume=True)
    df = exp.wait(timeout=600).results_df()
    assert sorted(df["status"]) == ["TERMINATED", "TERMINATED"] and set(df["iterations"]) == {2}, df
    assert finished.read_bytes() == before and len(finished.read_text().splitlines()) == 2  # not run again
    assert finished.parent.name in set(df["trial_id"])


def test_a_trial_that_cannot_fit_fails_at_once(lab, tmp_path):
    cfg = small_ppo(tmp_path, False, "cluster.remote_env=true", "env.num_cpus=100")
    with pytest.raises(ResourceError, match=r"a trial needs 201 CPUs .* but the cluster has 8"):
        lab.sweep(cfg, {"policy.optim.lr": [1e-3]})
    assert not any(Path(tmp_path).glob("sweeps/*"))  # nothing started


def test_cli_sweep_prints_the_table_and_the_best_config(ray_runtime, tmp_path, capsys):
    import yaml

    from rlightning.cli import main

    space = tmp_path / "space.yaml"
    space.write_text("policy.optim.lr: [0.001, 0.003]\n")
    argv = ["sweep", "cartpole_ppo", "env.num_workers=1", "env.num_envs=2", "train.rollout_steps=16"]
    argv += ["cluster.remote_env=false", f"log.run_dir={tmp_path}", "--space", str(space), "--iterations", "2"]
    argv += ["--max-concurrent", "1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    table, _, best = out.partition("its config:\n")
    assert "policy.optim.lr" in table and table.count("TERMINATED") == 2
    cfg = yaml.safe_load(best)
    assert cfg["policy"]["optim"]["lr"] in (0.001, 0.003) and cfg["env"]["num_envs"] == 2
