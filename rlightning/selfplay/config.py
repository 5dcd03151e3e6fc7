"""`LeagueConfig`: the settings of self-play against a league of snapshots (``env_kwargs.league``)."""

from __future__ import annotations

from typing import Any, Dict, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = ["LeagueConfig", "league_config"]


class LeagueConfig(BaseModel):
    """How the league grows, whom the learner meets, and how it is evaluated."""

    model_config = ConfigDict(extra="forbid")

    snapshot_every: int = Field(5, ge=1)
    """Iterations between snapshots of the learner (an ordinary checkpoint folder each); the first is taken
    before the first iteration."""
    pool_size: int = 8
    """The newest snapshots the learner is matched against (older ones stay in the Elo table)."""
    sampling: Literal["latest", "uniform", "pfsp"] = "pfsp"
    """Opponent per game: the newest snapshot, uniform over the pool, or prioritised fictitious self-play
    (the snapshots the learner beats least are met most; `pfsp_weights`)."""
    pfsp_weighting: Literal["hard", "variance"] = "hard"
    """PFSP's weight of a snapshot the learner beats with rate ``x``: ``(1 - x) ** pfsp_p`` (hard) or
    ``x * (1 - x)`` (variance: the evenly matched ones)."""
    pfsp_p: float = Field(2.0, gt=0)
    """The exponent of the hard weighting."""
    random_share: float = Field(0.0, ge=0, le=1)
    """Share of the learner's games against uniformly random play (a fixed member of the league)."""
    eval_games: int = Field(40, ge=0)
    """Games per seat of each evaluation match (against random play, the scripted opponent where the game
    has one, and each snapshot of the pool for the Elo ratings); 0: no evaluation."""
    initial_elo: float = 1000.0
    """The rating of random play (fixed: the anchor of the table) and of a snapshot before its first games
    (the ratings are fitted to all games at once, `rlightning.selfplay.elo.elo_fit`: no K-factor)."""

    @field_validator("pool_size")
    @classmethod
    def _pool(cls, value: int) -> int:
        if value < 1:
            raise ValueError(
                f"league.pool_size is {value}; the learner needs at least one snapshot to play (pool_size >= 1; "
                "use opponent 'random' or 'scripted' for no league)"
            )
        return value


def league_config(own: Dict[str, Any]) -> LeagueConfig:
    """The `LeagueConfig` of a turn-based env's options (``league_dir`` required, ``league`` the settings).

    Raises:
        ValueError: no ``league_dir``, or a bad ``league`` entry (the field and the valid values named).
    """
    folder = own.get("league_dir")
    if not isinstance(folder, str) or not folder:
        raise ValueError(
            "env_kwargs.opponent 'league' needs env_kwargs.league_dir: the folder of the league's snapshots and "
            f"league.json (e.g. runs/my_run/league), got {folder!r}"
        )
    raw = own.get("league") or {}
    if not isinstance(raw, dict):
        raise ValueError(f"env_kwargs.league must be a dict of LeagueConfig fields, got {raw!r}")
    try:
        return LeagueConfig(**raw)
    except ValidationError as err:
        parts = []
        for e in err.errors():
            loc = ".".join(str(p) for p in e["loc"])
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                import difflib

                close = difflib.get_close_matches(loc, list(LeagueConfig.model_fields), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                msg = f"unknown key{hint} (valid: {', '.join(LeagueConfig.model_fields)})"
            parts.append(f"env_kwargs.league.{loc}: {msg}")
        raise ValueError("; ".join(parts)) from None
