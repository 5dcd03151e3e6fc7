"""Issue 37: a sweep is checked as a whole before any trial starts; the statistics over seeds."""

import numpy as np
import pytest
from ray import tune

from rlightning.notebook.stats import aggregates, probability_of_improvement
from rlightning.notebook.sweep_space import check_metric, check_sweep
from rlightning.utils.config import load_preset


@pytest.fixture
def cfg(tmp_path):
    cfg = load_preset("cartpole_ppo")
    cfg.log.run_dir = str(tmp_path)
    return cfg


def test_space_keys_become_tune_params_and_seeds_a_grid(cfg):
    spec = check_sweep(cfg, {"policy.optim.lr": tune.loguniform(1e-4, 1e-2), "env.num_envs": [4, 8]}, seeds=3)
    assert spec.space["env.num_envs"] == {"grid_search": [4, 8]}
    assert spec.space["seed"] == {"grid_search": [cfg.seed, cfg.seed + 1, cfg.seed + 2]}
    assert spec.varied == ["policy.optim.lr", "env.num_envs", "seed"]
    assert (spec.stop_key, spec.stop_value) == ("iteration", cfg.train.iterations)
    spec = check_sweep(cfg, {"policy.ent_coef": [0.0, 0.01]}, scheduler="pbt", stop={"env_steps": 5000})
    assert spec.live == {"policy.ent_coef": "ent_coef"} and spec.stop_key == "env_steps"


@pytest.mark.parametrize(
    "space, options, error, match",
    [
        ({}, {}, ValueError, r"space is empty: give at least one dotted config path"),
        ({"policy.optim.lrr": [1e-3]}, {}, ValueError, r"space\['policy.optim.lrr'\].*Did you mean 'lr'"),
        ({"polcy.gamma": [0.9]}, {}, ValueError, r"unknown MainConfig key 'polcy'.*Did you mean 'policy'"),
        (
            {"train.rollout_steps": [0, 16]},
            {},
            ValueError,
            r"space\['train.rollout_steps'\].*greater than or equal to 1",
        ),
        ({"policy.gamma": tune.uniform(0.9, 1.5)}, {}, ValueError, r"space\['policy.gamma'\] = .*less than or equal"),
        ({"policy.gamma": [0.9]}, {"num_samples": 0}, ValueError, r"num_samples must be an int >= 1.*got 0"),
        (
            {"policy.gamma": [0.9]},
            {"stop": {"time_s": 60}},
            ValueError,
            r"stop key 'time_s' is not a counter; use one of env_steps, iterations",
        ),
        (
            {"train.rollout_steps": [16, 32]},
            {"scheduler": "pbt"},
            KeyError,
            r"'train.rollout_steps' is not one of them \(settable: .*policy.optim.lr",
        ),
        (
            {"policy.gamma": [0.9]},
            {"search": "bayes"},
            ValueError,
            r"search 'bayes' is not one of random, grid, optuna",
        ),
        (
            {"policy.gamma": [0.9]},
            {"scheduler": "hyperband"},
            ValueError,
            r"scheduler 'hyperband' is not one of None, 'asha', 'pbt'",
        ),
        (
            {"policy.gamma": tune.uniform(0.9, 0.99)},
            {"search": "grid"},
            ValueError,
            r"search='grid' needs a list of values for 'policy.gamma'",
        ),
        ({"policy.gamma": [0.9]}, {"seeds": 0}, ValueError, r"seeds must be >= 1"),
        ({"policy.gamma": [0.9]}, {"mode": "best"}, ValueError, r"mode must be 'max' or 'min', got 'best'"),
    ],
)
def test_bad_sweeps_are_refused_before_any_trial(cfg, space, options, error, match):
    with pytest.raises(error, match=match):
        check_sweep(cfg, space, **options)


def test_a_metric_never_reported_names_those_that_are(cfg):
    cfg.env.num_envs = 2
    cfg.train.rollout_steps = 8
    spec = check_sweep(cfg, {"policy.optim.lr": [1e-3]}, metric="episode_reward")
    with pytest.raises(ValueError, match=r"metric 'episode_reward' is never reported.*clipfrac.*episode_return_mean"):
        check_metric(spec)  # one local iteration tells what PPO reports
    check_metric(check_sweep(cfg, {"policy.optim.lr": [1e-3]}, metric="clipfrac"))  # PPO's own: accepted


def rliable_estimates(scores, func, reps, seed):
    """rliable called directly, as its README does (its resampling draws from NumPy's global generator)."""
    from rliable import library

    state = np.random.get_state()
    np.random.seed(seed)
    try:
        return library.get_interval_estimates(scores, func, reps=reps)
    finally:
        np.random.set_state(state)


def test_final_aggregates_equal_rliables_on_the_same_numbers():
    from rliable import metrics

    rng = np.random.default_rng(3)
    a, b = rng.normal(100, 20, size=10), rng.normal(80, 20, size=7)
    table = aggregates({"a": a, "b": b}, reps=300, seed=1)

    def fn(x):
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_median(x), metrics.aggregate_iqm(x)])

    points, intervals = rliable_estimates({"a": a[:, None], "b": b[:, None]}, fn, reps=300, seed=1)
    for label in ("a", "b"):
        for i, name in enumerate(("mean", "median", "iqm")):
            assert table.loc[label, name] == pytest.approx(points[label][i])
            assert table.loc[label, f"{name}_lo"] == pytest.approx(intervals[label][0, i])
            assert table.loc[label, f"{name}_hi"] == pytest.approx(intervals[label][1, i])
    assert table.loc["a", "mean"] == pytest.approx(a.mean()) and table.loc["b", "runs"] == 7
    assert table.loc["a", "iqm"] == pytest.approx(np.sort(a)[2:8].mean())  # the middle half of 10 runs
    assert table.loc["a", "median"] == pytest.approx(a.mean())  # rliable's median is over tasks: one task here
    for name in ("mean", "median", "iqm"):
        assert table.loc["a", f"{name}_lo"] < table.loc["a", name] < table.loc["a", f"{name}_hi"]
    assert aggregates({"a": a}, reps=300, seed=1).equals(aggregates({"a": a}, reps=300, seed=1))
    assert not aggregates({"a": a}, reps=300, seed=1).equals(aggregates({"a": a}, reps=300, seed=2))
    tasks = np.stack([a[:7], b], axis=1)  # 7 runs x 2 tasks: the median is over the tasks' means
    assert aggregates({"ab": tasks}, reps=300).loc["ab", "median"] == pytest.approx(np.median(tasks.mean(0)))
    with pytest.raises(ValueError, match=r"scores\['one'\] needs at least 2 runs .*got shape \(1,\)"):
        aggregates({"one": [1.0]})


def test_probability_of_improvement_is_rliables_pairs_ties_half():
    from rliable import metrics

    assert probability_of_improvement([3, 4], [1, 2], reps=200)["p"] == 1.0
    assert probability_of_improvement([1, 2], [3, 4], reps=200)["p"] == 0.0
    x, y = [1.0, 2.0, 3.0], [2.0, 2.0, 0.0]
    pairs = [(a > b) + 0.5 * (a == b) for a in x for b in y]
    poi = probability_of_improvement(x, y, reps=500, seed=4)
    assert poi["p"] == pytest.approx(np.mean(pairs)) and poi["lo"] <= poi["p"] <= poi["hi"]
    xs, ys = np.asarray(x)[:, None], np.asarray(y)[:, None]
    point, interval = rliable_estimates({"x,y": (xs, ys)}, metrics.probability_of_improvement, reps=500, seed=4)
    assert (poi["lo"], poi["hi"]) == pytest.approx(tuple(np.ravel(interval["x,y"])))
    with pytest.raises(ValueError, match=r"x and y need the same tasks"):
        probability_of_improvement(np.ones((3, 2)), np.ones((3, 1)))


def test_a_space_file_names_tune_domains():
    from rlightning.notebook.sweep_space import space_from_dict

    space = space_from_dict({"policy.optim.lr": {"loguniform": [1e-4, 1e-2]}, "policy.ent_coef": [0.0, 0.01]})
    assert type(space["policy.optim.lr"]).__name__ == "Float" and space["policy.optim.lr"].lower == 1e-4
    assert space["policy.ent_coef"] == [0.0, 0.01]
    with pytest.raises(ValueError, match=r"space\['policy.gamma'\] = \{'normal': \[0, 1\]\}: give a list .*loguniform"):
        space_from_dict({"policy.gamma": {"normal": [0, 1]}})
    with pytest.raises(ValueError, match=r"uniform takes a list \[low, high\], got \[1\]"):
        space_from_dict({"policy.gamma": {"uniform": [1]}})


def test_a_single_run_is_one_mlflow_run_in_the_local_store_and_one_offline_wandb_run(tmp_path):
    from mlflow.tracking import MlflowClient

    from rlightning.utils.builders import build_run
    from rlightning.utils.tracking import mlflow_uri
    from tests.support.configs import small_ppo
    from tests.support.tracking import history_of, read_wandb_run

    cfg = small_ppo(tmp_path, False, "env.num_workers=1", "log.name=single", "log.group=alone")
    cfg.log.mlflow, cfg.log.wandb, cfg.log.wandb_mode = True, True, "offline"
    assert mlflow_uri(cfg) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"  # the local store by default
    engine = build_run(cfg).engine
    rows = [engine.step() for _ in range(2)]
    engine.close()
    client = MlflowClient(tracking_uri=mlflow_uri(cfg))
    (run,) = client.search_runs([client.get_experiment_by_name("alone").experiment_id])
    assert (run.info.run_name, run.info.status) == ("single", "FINISHED")
    assert run.data.params["train.rollout_steps"] == "32" and run.data.params["env.name"] == "CartPole-v1"
    history = client.get_metric_history(run.info.run_id, "episode_return_mean")
    assert [(m.step, m.value) for m in history] == [
        (r["env_steps"], pytest.approx(r["episode_return_mean"])) for r in rows
    ]
    wandb_run = read_wandb_run(tmp_path / "single")
    assert (wandb_run["group"], wandb_run["name"], wandb_run["project"]) == ("alone", "single", "rlightning")
    assert history_of(wandb_run, "iteration") == [1, 2] and wandb_run["config"]["env"]["name"] == "CartPole-v1"
