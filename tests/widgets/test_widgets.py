"""Widget state checked headless: the views only render the core's snapshots."""

import time

import pytest
from rlightning.widgets import BufferViewWidget, EngineDashboard, EpisodeTableWidget, buffer_state, engine_state

from tests.support.configs import small_ppo


@pytest.fixture
def engine(tmp_path, build):
    return build(
        small_ppo(tmp_path, False, "buffer.type=replay", "buffer.sampler=uniform", "train.batch_size=32")
    ).engine


def test_buffer_view_follows_buffer_stats(engine):
    view = BufferViewWidget(engine.buffer)
    assert view.state["size"] == 0 and view.state["shards"][0]["fill"] == 0
    assert "rlightning-buffer-view" in view.widget.value
    engine.rollout()
    before = view.refresh_count
    state = view.refresh()
    assert view.refresh_count == before + 1
    assert state["size"] == engine.buffer.stats()["size"] > 0
    assert state["shards"][0]["fill"] == pytest.approx(state["size"] / state["capacity"])
    assert state["recent_episodes"], "finished CartPole episodes should be listed"
    assert {"env_id", "return", "length"} <= set(state["recent_episodes"][0])
    assert len(state["sample_rows"]) == 5 and "reward" in state["sample_rows"][0]
    assert f">{state['size']}<" in view.widget.value
    assert state["transitions_written"] == state["size"] and not state["cleared_by_sample"]
    assert f"rl-written'>{state['transitions_written']}<" in view.widget.value
    plain = {k: v for k, v in state.items() if k != "writes_per_sec"}  # the view's own windowed rate
    assert buffer_state(engine.buffer) == {**plain, "sample_rows": buffer_state(engine.buffer)["sample_rows"]}


def test_buffer_write_rate_is_windowed_so_a_burst_cannot_spike_it(engine):
    view = BufferViewWidget(engine.buffer)
    view._written.clear()
    assert view._write_rate(0, now=0.0) is None, "no rate before a second of history"
    assert view._write_rate(100, now=5.0) == 20.0
    assert view._write_rate(110, now=5.001) == pytest.approx(22.0, rel=1e-3), "10 adds in 1 ms barely move it"
    # the window keeps the newest sample at least 10 s old: (5.001, 110)
    assert view._write_rate(300, now=20.0) == pytest.approx((300 - 110) / (20.0 - 5.001)), "older samples leave"


def test_buffer_view_counts_what_an_on_policy_buffer_has_handed_to_training(tmp_path, build):
    engine = build(small_ppo(tmp_path, False)).engine
    view = BufferViewWidget(engine.buffer)
    engine.rollout()
    rollout = view.refresh()
    assert rollout["transitions_written"] == rollout["size"] > 0
    engine.train_rounds.run()
    trained = view.refresh()
    assert trained["cleared_by_sample"] and trained["size"] == 0, "a rollout buffer is emptied by the training sample"
    assert trained["transitions_written"] == rollout["transitions_written"]
    assert "emptied by each training sample" in view.widget.value
    engine.step()
    # NEXT_STEP autoreset: a sub-env's reset step counts as an env step but stores no transition
    assert rollout["transitions_written"] < view.refresh()["transitions_written"] <= engine.env_steps


def test_episode_table_view_maps_env_shard_workers(engine):
    view = EpisodeTableWidget(engine.buffer)
    rows = view.state["rows"]
    assert {r["env_id"] for r in rows} == set(engine.env_ids)
    assert all(r["storage"] == 0 and r["train_workers"] == [0] for r in rows)
    assert "rlightning-episode-table" in view.widget.value and engine.env_ids[0] in view.widget.value


def test_episode_table_updates_as_envs_register(engine):
    table = engine.buffer.episode_table
    view = EpisodeTableWidget(table)
    n = len(view.state["rows"])
    table.register_envs(["late-env-0"])
    assert len(view.refresh()["rows"]) == n + 1


def test_dashboard_tracks_engine(engine):
    dash = EngineDashboard(engine, live=False)
    assert dash.state["iteration"] == 0 and dash.progress.value == 0
    engine.step()
    engine.step()
    state = dash.refresh()
    assert state["iteration"] == 2 and dash.progress.value == 2
    assert state["env_steps"] == engine.env_steps
    assert "episode_return_mean" in state["series"] and len(state["series"]["env_steps_per_sec"]) == 2
    assert "rollout" in state["timing"]
    html = dash.widget.value
    assert "rlightning-dashboard" in html and "<polyline" in html and "rl-iteration'>2<" in html
    assert state == engine_state(engine)


def test_dashboard_updates_while_a_background_run_goes(tmp_path, build):
    from rlightning.notebook.run import Run
    from rlightning.utils.builders import build_run

    parts = build_run(small_ppo(tmp_path, False, "train.iterations=4"))
    run = Run("bg", parts.engine.config, parts)
    dash = EngineDashboard(run, interval=0.05)
    try:
        run.start()
        seen = set()
        deadline = time.time() + 120
        while run.is_running and time.time() < deadline:
            seen.add(dash.state.get("iteration"))
            time.sleep(0.02)
        history = run.wait()
        time.sleep(0.2)
        assert len(history) == 4
        assert dash.state["iteration"] == 4
        assert len(seen) >= 2, f"the dashboard never updated during the run: {seen}"
    finally:
        dash.close()
        run.close()


def test_without_ipywidgets_renders_html_with_hint(engine, monkeypatch):
    import rlightning.widgets._base as base

    monkeypatch.setattr(base, "ipywidgets_or_none", lambda: None)
    view = BufferViewWidget(engine.buffer)
    assert view.widget is None
    assert "rlightning-buffer-view" in view._repr_html_()
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj: shown.append(obj))
    view._ipython_display_()
    assert "pip install" in shown[0].data
    dash = EngineDashboard(engine, live=False)
    assert dash.container is None and "rlightning-episode-table" in dash._repr_html_()


def test_episode_table_view_shows_nodes_and_a_routing_diagram():
    from rlightning.buffer.utils.episode_table import EpisodeTable

    table = EpisodeTable(
        2,
        env_ids=["e0", "e1", "e2"],
        num_train_workers=2,
        component_distribution={
            "env": {"e0": {"node_ip": "10.0.0.1"}, "e1": {"node_ip": "10.0.0.2"}, "e2": {"node_ip": "10.0.0.1"}},
            "storage": {"0": {"node_ip": "10.0.0.1"}, "1": {"node_ip": "10.0.0.2"}},
            "train": {"0": {"node_ip": "10.0.0.1"}, "1": {"node_ip": "10.0.0.2"}},
        },
    )
    view = EpisodeTableWidget(table)
    rows = {r["env_id"]: r for r in view.state["rows"]}
    assert rows["e1"]["env_node"] == "10.0.0.2"
    shard = rows["e0"]["storage"]
    assert rows["e0"]["storage_node"] == table.component_distribution["storage"][str(shard)]["node_ip"]
    html = view.widget.value
    assert "shard node" in html and "10.0.0.2" in html
    assert html.count("<line") == 3 + sum(len(w) for w in view.state["storage_to_train"].values())
    assert "train 1" in html and "shard 0" in html
