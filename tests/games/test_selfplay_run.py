"""Self-play end to end on tic-tac-toe, one short run shared by the tests: every move of training is legal, the
league grows (snapshots, evaluation, Elo), the panel's league section shows it and ``run.play`` shows a game."""

from __future__ import annotations

import numpy as np
import pytest

from rlightning.env.turn_based_env import TurnBasedEnv
from rlightning.notebook.run import Run
from rlightning.utils.builders import build_run
from rlightning.utils.config import apply_overrides, load_preset

ITERATIONS = 3


@pytest.fixture(scope="module")
def selfplay(tmp_path_factory):
    """A ``tictactoe_selfplay`` run of 3 small iterations (a snapshot and its evaluation each), every move of
    every game recorded with the legal moves PettingZoo's own observation gave for it."""
    tmp = tmp_path_factory.mktemp("selfplay")
    cfg = apply_overrides(
        load_preset("tictactoe_selfplay"),
        [f"log.run_dir={tmp}", f"train.iterations={ITERATIONS}", "env.num_envs=8", "train.rollout_steps=8"],
    )
    cfg.env.env_kwargs["league_dir"] = str(tmp / "league")
    cfg.env.env_kwargs["league"].update(snapshot_every=1, pool_size=2, eval_games=4, random_share=0.25)
    moves = []
    real_move = TurnBasedEnv._move

    def recording_move(env, i, action):
        inner = env._inner[i]
        mover = inner.agent_selection
        legal = np.asarray(inner.observe(mover)["action_mask"], dtype=bool)  # the game's own mask, not our copy
        learner = mover == env._raw_ids[env._seat[i]]
        moves.append((learner, bool(legal[int(action)]), getattr(env._opp[i], "name", "?")))
        return real_move(env, i, action)

    TurnBasedEnv._move = recording_move
    try:
        parts = build_run(cfg)
        run = Run("selfplay", parts.engine.config, parts, freeze=True)
        run.run(ITERATIONS)
    finally:
        TurnBasedEnv._move = real_move
    yield run, moves
    run.close()


def test_every_move_of_training_is_legal(selfplay):
    run, moves = selfplay
    learner = [ok for is_learner, ok, _ in moves if is_learner]
    opponents = {name for is_learner, _, name in moves if not is_learner}
    assert len(learner) > ITERATIONS * 8 * 8 * 0.8  # the learner's moves of every iteration were seen
    assert all(ok for _, ok, _ in moves), "an illegal move was played"
    assert {"random", "iter_000000"} <= opponents  # random play and a frozen snapshot both played moves


def test_the_league_grows_and_is_rated(selfplay):
    run, _ = selfplay
    league = run.engine.league
    assert [s["name"] for s in league.snapshots] == ["iter_000000", "iter_000001", "iter_000002"]
    assert league.pool == ["iter_000001", "iter_000002"]
    assert (league.folder / "snapshots" / "iter_000002" / "policy.pt").is_file()
    # each snapshot played 4 games per seat against random play and the scripted opponent
    record = league.evals[-1]
    assert record["snapshot"] == "iter_000002"
    assert {"random/player_1", "random/player_2", "scripted/player_1", "scripted/player_2"} <= set(record)
    assert sum(league.matrix["iter_000002"]["random"]) == 8 and sum(league.matrix["iter_000002"]["iter_000001"]) == 8
    ratings = league.ratings()
    assert ratings["random"] == 1000.0
    assert all(abs(r - 1000.0) < 800 for r in ratings.values())  # 8-game matches: no runaway ratings
    metrics = run.metrics[-1]  # the league's metrics of the iteration's snapshot
    assert 0.0 <= metrics["league/random/player_1/win"] <= 1.0
    assert metrics["league/elo"] == pytest.approx(ratings["iter_000002"]) and metrics["league/snapshots"] == 3


def test_the_panel_shows_the_league_section(selfplay):
    from rlightning.widgets.league import league_view, win_rate_color
    from rlightning.widgets.panel import ControlPanel
    from rlightning.widgets.sections import SECTIONS

    run, _ = selfplay
    assert "league" in SECTIONS
    panel = ControlPanel(run, live=False)
    assert panel.state["sections"]["league"] is True
    html = panel.section_views["league"].body.value
    league = run.engine.league
    view = league_view(league)
    assert [row[0] for row in view["elo"]] == ["iter_000002", "iter_000001", "iter_000000", "random"]
    assert view["names"] == ["iter_000000", "iter_000001", "iter_000002"]
    assert view["matrix"][2][1] == pytest.approx(league.win_rate("iter_000002", "iter_000001"))
    assert view["matrix"][0][2] is None or view["matrix"][0][2] == pytest.approx(1 - view["matrix"][2][0])
    for name in ("iter_000000", "iter_000002", "random", "Elo", "in pool", "row against column"):
        assert name in html
    assert win_rate_color(0.5) == "rgb(255,255,255)" and win_rate_color(0.0) == "rgb(230,120,120)"
    assert win_rate_color(1.0) == "rgb(120,230,120)"


def test_run_play_shows_one_game_as_boards(selfplay):
    run, _ = selfplay
    game = run.play("random", seat="player_2", seed=3)
    assert game.seat == "player_2" and game.opponent == "random" and game.result in ("win", "draw", "loss")
    boards = [np.array([row.split() for row in f.splitlines()]) for f in game.frames]
    assert all(b.shape == (3, 3) for b in boards)
    assert (boards[0] == ".").sum() == 8  # the opponent (X's other side) opened: one O on the first board
    pieces = [int((b != ".").sum()) for b in boards]
    assert all(b - a in (1, 2) for a, b in zip(pieces, pieces[1:]))  # each frame: our move and the reply
    assert "<pre" in game._repr_html_() and "player_2 (X) against random (O)" in game._repr_html_()
    assert run.play("latest", seed=1).opponent == "iter_000002"  # a league snapshot by name
    assert run.play("scripted", seed=1).opponent == "scripted"
    with pytest.raises(ValueError, match="iter_000000, iter_000001, iter_000002"):
        run.play("iter_000099")


def test_the_league_section_is_empty_without_a_league():
    from types import SimpleNamespace

    from rlightning.widgets.league import LeagueSection

    section = LeagueSection(SimpleNamespace(engine=SimpleNamespace()))  # a run whose engine has no league
    assert section.refresh() is False and section.render_html() == ""
    no_snapshot = SimpleNamespace(engine=SimpleNamespace(league=SimpleNamespace(snapshots=[])))
    assert LeagueSection(no_snapshot).refresh() is False
