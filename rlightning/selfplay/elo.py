"""Elo ratings and PFSP weights: the arithmetic of the league, apart from any game."""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["elo_expected", "elo_update", "pfsp_weights", "score"]


def elo_expected(rating_a: float, rating_b: float) -> float:
    """The score ``a`` is expected to make per game against ``b``: ``1 / (1 + 10 ** ((rb - ra) / 400))``."""
    return 1.0 / (1.0 + 10.0 ** ((rating_b - rating_a) / 400.0))


def score(wins: int, draws: int, losses: int) -> float:
    """Points per game: a win 1, a draw 1/2 (NaN for no game)."""
    games = wins + draws + losses
    return (wins + 0.5 * draws) / games if games else float("nan")


def elo_update(
    rating_a: float, rating_b: float, wins: int, draws: int, losses: int, k: float = 32.0
) -> tuple[float, float]:
    """Both ratings after a match of ``a`` against ``b`` (counted from ``a``'s side), as one rating period:
    ``ra + k * (points - games * expected)``, and the opposite change for ``b``."""
    games = wins + draws + losses
    if games == 0:
        return rating_a, rating_b
    delta = k * ((wins + 0.5 * draws) - games * elo_expected(rating_a, rating_b))
    return rating_a + delta, rating_b - delta


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
