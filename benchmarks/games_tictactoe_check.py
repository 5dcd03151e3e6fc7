"""Tic-tac-toe self-play learning check, out of CI (run: ``python -m pytest benchmarks/games_tictactoe_check.py``).

It left the test suite because it holds for one seed of three: with
``python benchmarks/games_selfplay.py --preset tictactoe_selfplay --goal ttt`` (400 greedy games per seat), seed 0
meets the goal (0.98 wins first, 0.095-0.10 losses second) and seeds 1 and 2 end at 0.113 and 0.130 losses
moving second after 80 iterations; longer runs and about 20 tuning variants plateaued at 0.10-0.25. Issue 35's
"at least 90% wins as first mover, at most 10% losses as second" is not shown across seeds yet.

Tic-tac-toe self-play learns: the ``tictactoe_selfplay`` preset (PPO against a league of its own snapshots,
a quarter of its games against its snapshots and three quarters against random play, seats alternating) wins
>= 90% against random play moving first and loses <= 10% moving second, greedy.

Budget: the preset's 80 iterations of 32 games x 16 learner moves (40,960 learner moves; about 15 s of one CPU
core, measured with ``benchmarks/games_selfplay.py --preset tictactoe_selfplay --goal ttt``). For scale,
Tianshou's tic-tac-toe DQN tutorial trains 50 epochs x 1,000 steps against a random or a learning opponent,
and PettingZoo's SB3 tutorial trains connect four for 20,480 moves (reaching 86% wins against random play).

The evaluation is 400 greedy games per seat against uniformly random play with fixed seeds; training is seeded
(``seed: 0``), so the figures repeat on one platform. With 400 games a measured rate of 0.90 has a binomial
standard error of 0.015: passing at 0.90 / 0.10 means the true rates are >= 0.87 / <= 0.13 at 97.5% one-sided
confidence (the learned policy measured 0.95-1.00 / 0.05-0.10 while tuning).
"""

import numpy as np
import pytest

from rlightning.selfplay.matches import play_match
from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent
from rlightning.utils.builders import build_run
from rlightning.utils.config import apply_overrides, load_preset

pytestmark = pytest.mark.slow

GAMES = 400


def test_tictactoe_selfplay_beats_random_play_in_both_seats(tmp_path):
    cfg = apply_overrides(load_preset("tictactoe_selfplay"), [f"log.run_dir={tmp_path}"])
    cfg.env.env_kwargs["league_dir"] = str(tmp_path / "league")
    cfg.env.env_kwargs["league"].update(eval_games=0)  # the test evaluates once, at the end
    parts = build_run(cfg)
    try:
        parts.engine.run(progress=False)
        league = parts.engine.league
        assert len(league.snapshots) == 16 and len(league.pool) == 4  # a snapshot every 5 of the 80 iterations
        me = PolicyOpponent.from_weights(
            cfg.policy, parts.engine.env_metas[0], parts.policy_group.get_weights(), "learner", deterministic=True
        )
        first = play_match(cfg.env, me, RandomOpponent(np.random.default_rng(1)), GAMES, "player_1", seed=1).rates()
        second = play_match(cfg.env, me, RandomOpponent(np.random.default_rng(2)), GAMES, "player_2", seed=2).rates()
    finally:
        parts.engine.close()
    assert first["win"] >= 0.9, first
    assert second["loss"] <= 0.1, second
