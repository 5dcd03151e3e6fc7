"""Elo ratings and PFSP weights: the arithmetic of the league, apart from any game."""

from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np

__all__ = ["elo_expected", "elo_fit", "pfsp_weights", "score"]


def elo_expected(rating_a: float, rating_b: float) -> float:
    """The score ``a`` is expected to make per game against ``b``: ``1 / (1 + 10 ** ((rb - ra) / 400))``."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def score(wins: int, draws: int, losses: int) -> float:
    """Points per game: a win 1, a draw 1/2 (NaN for no game)."""
    games = wins + draws + losses
    return (wins + 0.5 * draws) / games if games else float("nan")


def elo_fit(
    results: Mapping[str, Mapping[str, Sequence[float]]],
    anchor: str,
    anchor_rating: float = 1000.0,
    prior_draws: float = 1.0,
    tol: float = 1e-9,
    max_iter: int = 10_000,
) -> Dict[str, float]:
    """Elo ratings fitted to all games at once: the maximum-likelihood Bradley-Terry strengths on the Elo scale
    (``P(a beats b) = elo_expected(ra, rb)``, a draw half a win), ``anchor`` fixed at ``anchor_rating``.

    Unlike game-by-game (or match-by-match) K-factor updates, the fit does not depend on the order or size of
    the matches: a 100-game match moves a rating as far as its result supports, not ``K`` points per game of
    surprise. ``prior_draws`` virtual draws of every player against the anchor keep perfect scores finite (a
    10-0 win over the anchor is rated as 10.5 of 11 points: +529) and connect players who never met it.

    Args:
        results: ``results[a][b] = [wins, draws, losses]`` of ``a`` against ``b`` (either or both directions;
            a pair given both ways is counted once, from the first name in sorted order).
        anchor: The player whose rating is fixed (random play in a league).
        anchor_rating: Its rating.
        prior_draws: Virtual draws of each player against the anchor (>= 0).

    Returns:
        The rating of every player named in ``results`` (and the anchor).

    Raises:
        ValueError: a negative ``prior_draws``, or (with none) a player whose strength the games leave unbounded.
    """
    if prior_draws < 0:
        raise ValueError(f"elo_fit: prior_draws must be >= 0, got {prior_draws!r}")
    names = sorted({anchor, *results, *(b for row in results.values() for b in row)})
    index = {n: i for i, n in enumerate(names)}
    n = len(names)
    games = np.zeros((n, n))  # games between i and j
    points = np.zeros((n, n))  # points of i against j
    seen = set()
    for a, row in results.items():
        for b, wdl in row.items():
            pair = (min(a, b), max(a, b))
            if a == b or pair in seen:
                continue
            seen.add(pair)
            w, d, losses = (float(x) for x in wdl)
            i, j = index[a], index[b]
            games[i, j] += w + d + losses
            games[j, i] += w + d + losses
            points[i, j] += w + 0.5 * d
            points[j, i] += losses + 0.5 * d
    k = index[anchor]
    games[:, k] += prior_draws
    games[k, :] += prior_draws
    points[:, k] += 0.5 * prior_draws
    points[k, :] += 0.5 * prior_draws
    games[k, k] = points[k, k] = 0.0
    won = points.sum(axis=1)
    bad = [names[i] for i in range(n) if i != k and (won[i] <= 0 or won[i] >= games[i].sum())]
    if bad:
        raise ValueError(
            f"elo_fit: {bad} won all or none of their games, so their ratings are unbounded; give prior_draws > 0"
        )
    gamma = np.ones(n)
    for _ in range(max_iter):  # Hunter's MM iteration for Bradley-Terry
        denom = (games / (gamma[:, None] + gamma[None, :])).sum(axis=1)
        new = np.where(denom > 0, won / np.where(denom > 0, denom, 1.0), gamma)
        new /= new[k]
        done = np.max(np.abs(np.log(new) - np.log(gamma))) < tol
        gamma = new
        if done:
            break
    return {name: float(anchor_rating + 400.0 * np.log10(gamma[i])) for name, i in index.items()}


def pfsp_weights(win_rates: Sequence[float], weighting: str = "hard", p: float = 2.0) -> np.ndarray:
    """Prioritised fictitious self-play: the probability of meeting each opponent, from the learner's score
    against it (``win_rates``: points per game in [0, 1]; NaN: not measured yet, weighted as 0.5).

    ``hard``: ``(1 - x) ** p``, the opponents it beats least; ``variance``: ``x * (1 - x)``, the even ones.
    All weights zero (it beats every one of them): uniform.

    Raises:
        ValueError: an unknown weighting or no opponents.
    """
    x = np.asarray(win_rates, dtype=np.float64).reshape(-1)
    if x.size == 0:
        raise ValueError("pfsp_weights needs at least one opponent's win rate")
    x = np.where(np.isnan(x), 0.5, np.clip(x, 0.0, 1.0))
    if weighting == "hard":
        w = (1.0 - x) ** float(p)
    elif weighting == "variance":
        w = x * (1.0 - x)
    else:
        raise ValueError(f"pfsp weighting must be 'hard' or 'variance', got {weighting!r}")
    total = w.sum()
    return w / total if total > 0 else np.full(x.size, 1.0 / x.size)
