"""The control panel headless: each button, clicked through the widget API, changes the run."""

from __future__ import annotations

import time

import pytest
from rlightning.widgets.charts import chart_series, draw_charts, smooth, windowed_rates
from rlightning.widgets.panel import ControlPanel, num

from rlightning.notebook.live import BuiltConfigError
from rlightning.notebook.run import Run
from tests.support.configs import small_ppo


@pytest.fixture
def make_run(tmp_path):
    from rlightning.utils.builders import build_run

    runs = []

    def _make(*extra: str, name: str = "panel") -> Run:
        cfg = small_ppo(tmp_path, False, *extra)
        parts = build_run(cfg.model_copy(deep=True))
        run = Run(name, parts.engine.config, parts, freeze=True)
        runs.append(run)
        return run

    yield _make
    for run in runs:
        run.close()


def _wait(predicate, timeout: float = 120.0) -> None:
    deadline = time.time() + timeout
    while not predicate():
        if time.time() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def test_step_button_runs_one_iteration_in_the_background(make_run):
    run = make_run()
    panel = ControlPanel(run, live=False)
    assert panel.state["iteration"] == 0 and panel.state["buttons"]["step"] and not panel.state["buttons"]["stop"]
    assert not panel.state["sections"]["episodes"] and not panel.state["sections"]["timing"]
    assert panel.sections["timing"].layout.display == "none", "an empty section is hidden"
    panel.buttons["step"].click()
    run.wait(120)
    state = panel.refresh(force_chart=True)
    assert run.engine.iteration == 1 and state["iteration"] == 1 and panel.progress.value == 1
    assert state["state"] == "done" and state["status"] == "finished 1 iteration(s), at iteration 1"
    assert panel.progress.bar_style == "success"
    assert state["sections"]["timing"] and panel.sections["timing"].layout.display is None
    assert panel.chart.value[:4] == b"\x89PNG"
    assert "rl-iteration'>1<" in panel.header.value


def test_run_pause_resume_stop_buttons_drive_the_run(make_run):
    run = make_run("train.iterations=400")
    panel = ControlPanel(run, live=False)
    panel.n_field.value = 300
    panel.buttons["run"].click()
    assert run.is_running and run.goal == (0, 300)
    assert panel.state["buttons"]["pause"] and not panel.state["buttons"]["step"]
    _wait(lambda: run.engine.iteration >= 1)
    panel.buttons["pause"].click()
    run.wait(120)
    paused_at = run.engine.iteration
    state = panel.refresh()
    assert state["state"] == "paused" and f"paused at iteration {paused_at}" in state["status"]
    assert state["buttons"]["resume"] and 1 <= paused_at < 300
    assert panel.progress.bar_style == "info"
    panel.buttons["resume"].click()
    assert run.is_running and run.goal == (paused_at, 300)
    _wait(lambda: run.engine.iteration > paused_at)
    panel.buttons["stop"].click()
    run.wait(120)
    state = panel.refresh()
    assert state["state"] == "stopped" and state["status"] == f"stopped at iteration {run.engine.iteration}"
    assert paused_at < run.engine.iteration < 300


def test_target_return_reached_is_a_success_with_its_iteration(make_run):
    run = make_run("train.target_return=5")
    history = run.run(iterations=3)
    assert len(history) == 1, "CartPole's first episodes already return more than 5"
    assert run.status["state"] == "done"
    assert run.status["message"].startswith("target return 5 reached at iteration 1 (mean return")
    panel = ControlPanel(run, live=False)
    assert panel.progress.bar_style == "success" and "target return 5 reached" in panel.status_label.value


def test_one_iteration_count_for_run_run_and_the_panel(make_run):
    run = make_run("train.iterations=3")
    run.step()
    run.run(iterations=2)
    panel = ControlPanel(run, live=False)
    assert run.goal == (1, 3) and panel.state["iteration"] == 3 == run.engine.iteration
    assert panel.progress.value == 3 and panel.progress.max == 3


def test_failure_shows_in_the_status_line(make_run, monkeypatch):
    run = make_run()
    panel = ControlPanel(run, live=False)

    def broken():
        raise ValueError("env exploded")

    monkeypatch.setattr(run.engine, "iteration_phases", broken)
    panel.buttons["step"].click()
    with pytest.raises(RuntimeError, match="failed: ValueError: env exploded"):
        run.wait(60)
    state = panel.refresh()
    assert state["state"] == "failed" and state["status"] == "failed at iteration 1: ValueError: env exploded"
    assert panel.progress.bar_style == "danger"


def test_apply_button_sets_hyperparameters_from_the_next_iteration(make_run):
    run = make_run()
    panel = ControlPanel(run, live=False)
    assert {"lr", "ent_coef", "clip_coef"} <= set(panel.fields)
    panel.fields["ent_coef"].value = 0.05
    panel.fields["clip_coef"].value = 0.1
    panel.buttons["step"].click()
    run.wait(60)
    panel.apply_button.click()
    metrics = run.step()
    assert metrics["set_ent_coef"] == 0.05 and metrics["set_clip_coef"] == 0.1
    assert run.config.policy.ent_coef == 0.05
    assert "ent_coef=0.05" in panel.refresh()["hyperparameters"].__repr__() or panel.state["hyperparameters"]
    panel.fields["clip_coef"].value = -1.0
    panel.apply_button.click()
    assert "greater than 0" in panel.state["error"]


def test_run_set_reaches_the_train_worker_and_the_metrics(make_run):
    run = make_run()
    worker = run.policy_group.train_workers[0].worker
    run.step()
    assert run.set(lr=1e-4, ent_coef=0.02) == {"lr": 1e-4, "ent_coef": 0.02}
    assert worker.config.optim.lr == 1e-4 and worker.config.ent_coef == 0.02 and worker.base_lr == 1e-4
    metrics = run.step()
    assert metrics["set_lr"] == 1e-4 and metrics["set_ent_coef"] == 0.02
    assert metrics["lr"] <= 1e-4, "PPO's reported learning rate (annealed) follows the new base"
    with pytest.raises(KeyError, match="'hidden_sizes' cannot be changed on a built run; settable: .*clip_coef"):
        run.set(hidden_sizes=[8])
    with pytest.raises(ValueError, match="lr: Input should be greater than 0"):
        run.set(lr=-1.0)
    assert worker.config.optim.lr == 1e-4, "a rejected value changes nothing"


def test_assigning_a_built_config_field_says_to_use_run_set(make_run):
    run = make_run()
    with pytest.raises(
        BuiltConfigError,
        match=r"run.config.policy.optim.lr of a built run no longer takes effect.*"
        r"use run.set\(lr=0.0003\)",
    ):
        run.config.policy.optim.lr = 3e-4
    with pytest.raises(BuiltConfigError, match=r"run.config.env.num_envs .*lab.build\(cfg\) again"):
        run.config.env.num_envs = 2
    run.config.train.iterations = 7  # still read by run(): allowed
    copy = run.config.model_copy(deep=True)
    copy.policy.optim.lr = 3e-4  # a copy is a fresh config again
    assert copy.policy.optim.lr == 3e-4 and run.config.policy.optim.lr != 3e-4


def test_panel_without_ipywidgets_renders_html(make_run, monkeypatch):
    import rlightning.widgets.panel as panel_mod

    run = make_run()
    monkeypatch.setattr(panel_mod, "ipywidgets_or_none", lambda: None)
    monkeypatch.setattr("rlightning.widgets._base.ipywidgets_or_none", lambda: None)
    panel = ControlPanel(run, live=False)
    assert panel.container is None
    panel.press("step")
    run.wait(60)
    assert "rlightning-panel" in panel._repr_html_() and run.engine.iteration == 1


def test_show_displays_once_as_the_last_expression(make_run, monkeypatch):
    from IPython.testing.globalipapp import get_ipython

    shell = get_ipython()
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    run = make_run()
    shell.user_ns["run"] = run
    shell.run_cell("run.show(live=False)", store_history=True)
    assert len(shown) == 1, f"run.show() displayed {len(shown)} times"
    shell.run_cell("panel = run.show(live=False)\npanel", store_history=True)
    assert len(shown) == 2
    shell.run_cell("panel", store_history=True)  # a later cell shows it again
    assert len(shown) == 3


def test_charts_and_rates():
    assert smooth([0.0, 2.0, 4.0, 6.0], 2) == [0.0, 1.0, 3.0, 5.0]
    rows = [
        {"iteration": 1, "rollout_env_steps": 100, "iteration_time": 1.0, "env_steps": 100},
        {"iteration": 2, "rollout_env_steps": 100, "iteration_time": 0.0001, "env_steps": 200},
    ]
    # a burst (one very short iteration) does not spike the rate: steps over busy seconds in the window
    assert windowed_rates(rows) == [100.0, pytest.approx(200 / 1.0001)]
    rows[1]["episode_return_mean"] = 20.0
    series = chart_series(rows)
    assert set(series) == {"mean episode return", "throughput"}
    assert series["mean episode return"]["episode_return_mean"] == ([200.0], [20.0])
    assert draw_charts(rows, target_return=475)[:4] == b"\x89PNG" and draw_charts([]) is None
    assert num(10291.29) == "10,291" and num(0.000123456) == "0.000123" and num(4096) == "4,096"


def test_play_button_shows_an_episode_video_and_saved_notebooks_read_plainly(make_run):
    pytest.importorskip("imageio_ffmpeg")
    pytest.importorskip("pygame")
    run = make_run()
    panel = ControlPanel(run, live=False)
    assert panel.player.layout.display == "none"
    panel.buttons["play"].click()
    assert panel.state["error"] is None, panel.state["error"]
    assert "rl-episode-video" in panel.player.value and panel.player.layout.display is None
    ep = panel.last_player.state["episodes"][0]
    assert ep["length"] >= 1 and f"length {ep['length']}" in panel.player.value
    assert repr(panel.container) == "rlightning control panel of run 'panel' (live while its kernel runs)"


def test_progress_line_of_run_run_in_a_notebook(make_run, monkeypatch):
    import rlightning.widgets.progress as progress

    shown = []
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append(obj))
    run = make_run("train.iterations=2", "log.progress=true")
    run.run()
    (box,) = shown
    bar, label = box.children
    assert (bar.min, bar.value, bar.max) == (0, 2, 2) and bar.bar_style == "success"
    assert label.value.endswith("finished 2 iteration(s), at iteration 2")
    assert repr(box).startswith("iteration 2/2")


def test_run_set_lr_reaches_every_optimizer_that_used_it_in_sac(tmp_path):
    from rlightning.utils.builders import build_run
    from tests.support.configs import small_sac

    parts = build_run(small_sac(tmp_path, False))
    run = Run("sac", parts.engine.config, parts, freeze=True)
    try:
        assert "q_lr" in run.settable and "tau" in run.settable  # read from the policy config object's fields
        worker = run.policy_group.train_workers[0].worker
        before = {n: [g["lr"] for g in o.param_groups] for n, o in worker.optimizers.items()}
        lr = run.config.policy.optim.lr
        run.set(lr=lr / 2, tau=0.01)
        after = {n: [g["lr"] for g in o.param_groups] for n, o in worker.optimizers.items()}
        for name, lrs in before.items():
            expected = [lr / 2 if v == lr else v for v in lrs]
            assert after[name] == pytest.approx(expected), name
        assert worker.config.tau == 0.01 and run.step()["set_tau"] == 0.01
    finally:
        run.close()


def test_a_registered_section_is_one_class_and_shows_in_every_new_panel(make_run):
    from rlightning.widgets.sections import SECTIONS, PanelSection, register_section

    @register_section("losses")
    class LossesSection(PanelSection):
        def refresh(self):
            last = self.run.metrics[-1] if self.run.metrics else {}
            self.losses = {k: v for k, v in last.items() if k.endswith("_loss")}
            return bool(self.losses)

        def build(self, w):
            self.body = w.HTML()
            return self.body

        def update(self):
            self.body.value = self.render_html()

        def render_html(self):
            return "<div class='rl-losses'>" + ", ".join(f"{k}={num(v)}" for k, v in self.losses.items()) + "</div>"

    try:
        run = make_run()
        panel = ControlPanel(run, live=False)
        assert list(panel.sections)[-1] == "losses" and panel.state["sections"]["losses"] is False
        assert panel.sections["losses"].layout.display == "none"
        run.step()
        state = panel.refresh()
        assert state["sections"]["losses"] and panel.sections["losses"].layout.display is None
        assert "policy_loss=" in panel.section_views["losses"].body.value
        assert "rl-losses" in panel.render_html()
    finally:
        SECTIONS.pop("losses", None)
    with pytest.raises(TypeError, match="takes a PanelSection subclass"):
        register_section("bad")(dict)
