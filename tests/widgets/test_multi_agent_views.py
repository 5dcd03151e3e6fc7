"""Per-agent returns in the EpisodeTable view and on the dashboard (multi-agent runs)."""

from rlightning.widgets.dashboard import agent_returns_html
from rlightning.widgets.episode_table import EpisodeTableWidget, episode_table_state

from rlightning.buffer.utils.episode_table import EpisodeTable
from rlightning.env.utils.stats import GroupStats


def table():
    return EpisodeTable(1, env_ids=["ma-0", "ma-1"], num_train_workers=1)


def test_episode_table_rows_carry_each_agents_return_per_env():
    stats = GroupStats(["ma-0", "ma-1"])
    stats.add_agent_episodes({"a0": [1.0, 3.0], "a1": [-1.0, -1.0]}, env_id="ma-0")
    stats.add_agent_episodes({"a0": [5.0]}, env_id="ma-1")
    snap = stats.snapshot()
    assert snap["recent_agent_returns"] == {"a0": [1.0, 3.0, 5.0], "a1": [-1.0, -1.0]}
    state = episode_table_state(table(), snap["env_agent_return_mean"])
    rows = {r["env_id"]: r["agent_returns"] for r in state["rows"]}
    assert rows == {"ma-0": {"a0": 2.0, "a1": -1.0}, "ma-1": {"a0": 5.0}}
    view = EpisodeTableWidget(table(), stats.snapshot)
    html = view.render_html(view.state)
    assert "return a0" in html and "return a1" in html and "2.0" in html and "5.0" in html


def test_single_agent_tables_and_dashboards_show_no_agent_columns():
    view = EpisodeTableWidget(table())
    assert "return " not in view.render_html(view.state)
    assert agent_returns_html({"episode_return_mean": 3.0}) == ""
    line = agent_returns_html({"agent_return_mean/a1": -2.25, "agent_return_mean/a0": 1.0})
    assert line.index("a0 1.0") < line.index("a1 -2.2")
