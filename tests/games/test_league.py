"""The league's arithmetic (Elo, PFSP) against hand-computed values, its file round trip, and a real league's
snapshots surviving a new run on the same folder."""

import json
import math

import numpy as np
import pytest

from rlightning.selfplay import LeagueConfig, elo_expected, elo_fit, pfsp_weights
from rlightning.selfplay.league import League
from rlightning.selfplay.league_file import LeagueOpponents
from rlightning.utils.config import EnvConfig, PolicyConfig

TTT = EnvConfig(name="pettingzoo.classic:tictactoe_v3", backend="pettingzoo_aec", num_envs=2)


def test_elo_fit_matches_hand_computed_values():
    assert elo_expected(1000, 1000) == 0.5
    assert elo_expected(1200, 1000) == pytest.approx(1 / (1 + 10**-0.5)) == pytest.approx(0.7597469266)
    # a chain a > random (75%), b > a (75%): the fit reproduces both scores exactly, 400 log10(3) apart
    results = {"a": {"random": [30, 0, 10]}, "b": {"a": [28, 4, 8]}}
    fit = elo_fit(results, "random", 1000.0, prior_draws=0)
    step = 400 * math.log10(3)  # 190.85: a 75% score
    assert fit == pytest.approx({"random": 1000.0, "a": 1000 + step, "b": 1000 + 2 * step})
    # one virtual draw against the anchor keeps a perfect score finite: 10-0 is 10.5 of 11 points
    fit = elo_fit({"a": {"random": [10, 0, 0]}}, "random", 1000.0, prior_draws=1)
    assert fit["a"] == pytest.approx(1000 + 400 * math.log10(10.5 / 0.5)) == pytest.approx(1528.9, abs=0.1)
    # the size of a match does not inflate the rating: 90 of 100 and 9 of 10 rate alike (K=32 updates did not)
    big = elo_fit({"a": {"random": [90, 0, 10]}}, "random", prior_draws=0)["a"]
    small = elo_fit({"a": {"random": [9, 0, 1]}}, "random", prior_draws=0)["a"]
    assert big == pytest.approx(small) == pytest.approx(1000 + 400 * math.log10(9))
    # a pair given both ways counts once
    both = {"a": {"random": [30, 0, 10]}, "random": {"a": [10, 0, 30]}}
    assert elo_fit(both, "random", prior_draws=0)["a"] == pytest.approx(1000 + step)
    with pytest.raises(ValueError, match="won all or none of their games"):
        elo_fit({"a": {"random": [5, 0, 0]}}, "random", prior_draws=0)


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
    league = _league(tmp_path, pool_size=2)
    league.add_snapshot("iter_000000", 0)
    league.rate("iter_000000", "random", {"win": 8, "draw": 1, "loss": 1})
    league.add_snapshot("iter_000005", 5)
    league.rate("iter_000005", "iter_000000", {"win": 3, "draw": 3, "loss": 4})
    league.evals.append({"snapshot": "iter_000005", "random/player_1": {"win": 1.0, "draw": 0.0, "loss": 0.0}})
    league.save()
    again = _league(tmp_path, pool_size=2)
    assert again.state() == league.state()
    assert again.ratings() == league.ratings()
    assert again.ratings()["random"] == 1000.0  # the anchor does not move
    # the fit of all three matches: the same as fitting the matrix by hand
    expected = elo_fit(
        {"iter_000000": {"random": [8, 1, 1]}, "iter_000005": {"iter_000000": [3, 3, 4]}}, "random", prior_draws=1
    )
    assert again.ratings() == pytest.approx(expected)
    assert expected["iter_000000"] > expected["iter_000005"] > 1000.0
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
