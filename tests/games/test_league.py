"""The league's arithmetic (Elo, PFSP) against hand-computed values, its file round trip, and a real league's
snapshots surviving a new run on the same folder."""

import json
import math

import numpy as np
import pytest

from rlightning.selfplay import LeagueConfig, elo_expected, elo_update, pfsp_weights
from rlightning.selfplay.league import League
from rlightning.selfplay.league_file import LeagueOpponents
from rlightning.utils.config import EnvConfig, PolicyConfig

TTT = EnvConfig(name="pettingzoo.classic:tictactoe_v3", backend="pettingzoo_aec", num_envs=2)


def test_elo_update_matches_hand_computed_values():
    # equal ratings: expected 0.5 per game; a win moves each side by K/2
    assert elo_expected(1000, 1000) == 0.5
    assert elo_update(1000, 1000, 1, 0, 0, k=32) == (1016.0, 984.0)
    # 1200 vs 1000: E = 1 / (1 + 10 ** (-200 / 400)) = 0.759746926...
    e = 1 / (1 + 10**-0.5)
    assert elo_expected(1200, 1000) == pytest.approx(0.7597469266)
    # a 10-game match: 5 wins, 2 draws, 3 losses = 6 points against 7.5975 expected: -1.5975 * K
    ra, rb = elo_update(1200, 1000, 5, 2, 3, k=16)
    assert ra == pytest.approx(1200 + 16 * (6 - 10 * e)) == pytest.approx(1174.44049)
    assert rb == pytest.approx(1000 - 16 * (6 - 10 * e)) == pytest.approx(1025.55951)
    assert elo_update(1100, 900, 0, 0, 0) == (1100, 900)  # no game, no change


def test_pfsp_weights():
    # hard: (1 - x) ** 2 normalised; 0.5 for an opponent not measured yet
    np.testing.assert_allclose(pfsp_weights([0.0, 0.5, 1.0]), [0.8, 0.2, 0.0])
    np.testing.assert_allclose(pfsp_weights([0.9, float("nan")], p=1.0), [0.1 / 0.6, 0.5 / 0.6])
    # variance: x (1 - x), the even matches
    np.testing.assert_allclose(pfsp_weights([0.5, 0.9, 1.0], "variance"), [0.25 / 0.34, 0.09 / 0.34, 0.0])
    np.testing.assert_allclose(pfsp_weights([1.0, 1.0]), [0.5, 0.5])  # beats them all: uniform
    with pytest.raises(ValueError, match="'hard' or 'variance'"):
        pfsp_weights([0.5], "soft")


def _league(tmp_path, **kw):
    return League(LeagueConfig(**kw), tmp_path, TTT, PolicyConfig(type="ppo"))


def test_sampling_probabilities_and_the_pool(tmp_path):
    league = _league(tmp_path, pool_size=3, sampling="pfsp")
    for i in range(4):
        league.add_snapshot(f"iter_{i:06d}", i)
    assert league.pool == ["iter_000001", "iter_000002", "iter_000003"]
    league.rate("iter_000003", "iter_000001", {"win": 9, "draw": 0, "loss": 1})
    league.rate("iter_000003", "iter_000002", {"win": 5, "draw": 0, "loss": 5})
    # the newest against the pool: 0.9, 0.5, and itself unmeasured (0.5): hard weights 0.01, 0.25, 0.25
    np.testing.assert_allclose(league.probabilities(), np.array([0.01, 0.25, 0.25]) / 0.51)
    assert league.win_rate("iter_000001", "iter_000003") == pytest.approx(0.1)
    league.config = LeagueConfig(pool_size=3, sampling="latest")
    assert league.probabilities().tolist() == [0.0, 0.0, 1.0]
    league.config = LeagueConfig(pool_size=3, sampling="uniform")
    np.testing.assert_allclose(league.probabilities(), [1 / 3] * 3)


def test_league_file_round_trip(tmp_path):
    league = _league(tmp_path, pool_size=2, elo_k=10)
    league.add_snapshot("iter_000000", 0)
    league.rate("iter_000000", "random", {"win": 8, "draw": 1, "loss": 1})
    league.add_snapshot("iter_000005", 5)
    league.rate("iter_000005", "iter_000000", {"win": 3, "draw": 3, "loss": 4})
    league.evals.append({"snapshot": "iter_000005", "random/player_1": {"win": 1.0, "draw": 0.0, "loss": 0.0}})
    league.save()
    again = _league(tmp_path, pool_size=2, elo_k=10)
    assert again.state() == league.state()
    assert again.ratings() == league.ratings()
    assert again.ratings()["random"] == 1000.0  # the anchor does not move
    first = 1000 + 10 * (8.5 - 10 * 0.5)
    assert again.ratings()["iter_000000"] == pytest.approx(first - 10 * (4.5 - 10 * elo_expected(first, first)))
    on_disk = json.loads((tmp_path / "league.json").read_text())
    assert on_disk["pool"] == ["iter_000000", "iter_000005"] and math.isclose(sum(on_disk["probs"]), 1.0)


def test_env_workers_follow_the_league_file(tmp_path):
    league = _league(tmp_path, pool_size=2, random_share=1.0)
    picks = LeagueOpponents(tmp_path, None, ["player_1", "player_2"], np.random.default_rng(0))
    assert picks.pick().name == "random"  # no file yet: random play
    league.add_snapshot("iter_000000", 0)
    league.save()
    assert picks.pick().name == "random"  # random_share 1.0
    assert picks._pool == ["iter_000000"]
