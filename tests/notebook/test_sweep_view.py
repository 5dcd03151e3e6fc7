"""Issue 37: the live sweep view (``exp.show()``), headless, over an `Experiment` fed as Tune's callbacks feed it.

No Tune run: the trials' statuses and reported rows go through ``Experiment._update`` (what the sweep's
Tune callback calls), and the sweep reads as running while a thread stands in for ``tuner.fit``.
"""

import threading
from dataclasses import dataclass, field
from typing import Any, Dict

import pytest

from rlightning.notebook.experiment import Experiment
from rlightning.notebook.sweep_space import check_sweep
from rlightning.utils.config import load_preset

pytest.importorskip("ipywidgets")


@dataclass
class _Trial:
    """What `Experiment._update` reads of a Tune trial."""

    trial_id: str
    config: Dict[str, Any] = field(default_factory=dict)


@pytest.fixture
def running_sweep(tmp_path):
    """2 learning rates x 2 seeds, every trial started, two of them reported; the sweep running."""
    cfg = load_preset("cartpole_ppo")
    cfg.log.run_dir = str(tmp_path)
    spec = check_sweep(cfg, {"policy.optim.lr": [3e-4, 3e-3]}, seeds=2)
    exp = Experiment(spec, tmp_path / "sweeps" / "view", make_tuner=lambda callbacks, stopper: None)
    trials = [_Trial(f"t{i}", {"policy.optim.lr": lr, "seed": s}) for i, (s, lr) in enumerate(
        [(cfg.seed, 3e-4), (cfg.seed, 3e-3), (cfg.seed + 1, 3e-4), (cfg.seed + 1, 3e-3)]
    )]  # fmt: skip
    for trial in trials:
        exp._update(trial, status="RUNNING")
    for trial, returns in ((trials[0], [20.0, 30.0]), (trials[1], [25.0, 15.0]), (trials[2], [22.0, 40.0])):
        for i, value in enumerate(returns, 1):
            exp._update(trial, result={"iteration": i, "env_steps": 256 * i, "episode_return_mean": value})
    done = threading.Event()
    exp._thread = threading.Thread(target=done.wait, daemon=True)  # stands in for tuner.fit
    exp._thread.start()
    yield exp, trials
    done.set()


def test_the_stop_trial_dropdown_selects_a_running_trial_and_stops_it(running_sweep):
    from rlightning.widgets.experiment import ExperimentView

    exp, trials = running_sweep
    view = ExperimentView(exp, live=False)
    assert list(view.trial_picker.options) == ["t0", "t1", "t2", "t3"]
    assert view.trial_picker.value == "t0"  # ipywidgets alone leaves it blank (None) when options arrive
    view.trial_picker.value = "t2"
    exp._update(trials[1], status="TERMINATED")
    view.refresh()
    assert list(view.trial_picker.options) == ["t0", "t2", "t3"] and view.trial_picker.value == "t2"  # kept
    view.stop_trial_button.click()
    assert exp._stopper("t2", {}) and not exp._stopper("t0", {})  # Tune's stopper ends t2 at its next report
    exp._update(trials[2], status="TERMINATED")
    view.refresh()
    assert view.trial_picker.value == "t0"  # the selected trial ended: another running one
    assert not view.stop_trial_button.disabled and not view.stop_button.disabled


def test_a_trial_that_has_not_reported_shows_dashes_not_nan(running_sweep):
    from rlightning.widgets.experiment import ExperimentView

    exp, _ = running_sweep
    view = ExperimentView(exp, live=False)
    (quiet,) = [r for r in view.state["trials"] if r["trial_id"] == "t3"]
    assert quiet["last"] is None and quiet["best"] is None and quiet["iterations"] == 0
    row = view.table.value.split("t3", 1)[1].split("</tr>", 1)[0]
    assert "nan" not in view.table.value.lower() and row.count("<td style='text-align:left;padding:0 8px'>-</td>") == 2
    reported = [r for r in view.state["trials"] if r["trial_id"] == "t0"][0]
    assert (reported["last"], reported["best"]) == (30.0, 30.0)


def test_the_hyperparameter_view_groups_seeds_by_config_and_has_no_seed_panel(running_sweep):
    from rlightning.widgets.experiment import config_points, draw_params, experiment_state, param_panels

    exp, _ = running_sweep

    state = experiment_state(exp)
    groups = config_points(state["trials"], state["varied"])
    assert state["varied"] == ["policy.optim.lr", "seed"]
    assert [g["params"] for g in groups] == [{"policy.optim.lr": 3e-4}, {"policy.optim.lr": 3e-3}]
    assert [sorted(g["values"]) for g in groups] == [[30.0, 40.0], [15.0]] and groups[0]["mean"] == 35.0
    assert param_panels(groups, state["varied"]) == ["policy.optim.lr"]  # no panel of its own for the seed
    assert draw_params(state["trials"], state["varied"], state["metric"])[:4] == b"\x89PNG"
    assert draw_params(state["trials"], ["seed"], state["metric"]) is None  # lab.seeds: no hyperparameter
