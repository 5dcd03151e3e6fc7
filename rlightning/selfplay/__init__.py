"""Self-play for turn-based games: a learner against a league of frozen snapshots of itself.

- `LeagueConfig` (``env_kwargs.league`` of the ``pettingzoo_aec`` / ``openspiel`` backends with
  ``opponent: league``): snapshot interval, pool size, opponent sampling (latest, uniform, PFSP), evaluation;
- `League`: the driver's side, a hook before each iteration: snapshots (ordinary checkpoint folders),
  evaluation against random play and the scripted opponent (win / draw / loss per seat), Elo ratings and the
  win-rate matrix of the snapshots, the pool's sampling probabilities (``league.json``);
- opponents (`RandomOpponent`, `ScriptedOpponent`, `PolicyOpponent`) and `play_match` (games between two
  players, per seat);
- `elo_fit` (ratings fitted to all games), `pfsp_weights`: the arithmetic.
"""

from rlightning.selfplay.config import LeagueConfig, league_config
from rlightning.selfplay.elo import elo_expected, elo_fit, pfsp_weights, score
from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent, ScriptedOpponent

__all__ = [
    "LeagueConfig",
    "PolicyOpponent",
    "RandomOpponent",
    "ScriptedOpponent",
    "elo_expected",
    "elo_fit",
    "league_config",
    "pfsp_weights",
    "score",
]
