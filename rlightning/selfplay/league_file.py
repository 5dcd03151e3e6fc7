"""The league's file (``<league_dir>/league.json``) and the env side's view of it: whom a game is played against.

The driver's `rlightning.selfplay.league.League` writes the file (atomically) after each snapshot and
evaluation; env workers read it again when it changes, and draw an opponent per game from its ``pool`` with its
``probs`` (or random play with ``random_share``). Snapshots are ordinary checkpoint folders under the league
folder, loaded by `PolicyOpponent.from_checkpoint` and kept while they are in the pool.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

import numpy as np

from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["LEAGUE_FILE", "FixedOpponents", "LeagueOpponents", "read_league", "write_league"]

LEAGUE_FILE = "league.json"


def read_league(folder: Any) -> Optional[Dict[str, Any]]:
    """The league state in ``folder`` (None when there is none yet).

    Raises:
        ValueError: a league.json that is not valid JSON (named).
    """
    path = Path(folder) / LEAGUE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"league file {str(path)!r} is not valid JSON: {err}") from None


def write_league(folder: Any, state: Dict[str, Any]) -> Path:
    """Write ``state`` to ``folder/league.json`` atomically (written aside, then renamed)."""
    path = Path(folder) / LEAGUE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state, indent=1))
    os.replace(tmp, path)
    return path


class FixedOpponents:
    """Every game against one opponent."""

    def __init__(self, opponent: Any) -> None:
        self.opponent = opponent

    def pick(self) -> Any:
        """The opponent of the next game."""
        return self.opponent

    def reseed(self, rng: np.random.Generator) -> None:
        """Draw from ``rng`` from now on (an opponent that samples)."""
        if hasattr(self.opponent, "rng"):
            self.opponent.rng = rng


class LeagueOpponents:
    """Per game, a snapshot of the league drawn with the file's probabilities (see the module docstring).

    Args:
        folder: The league folder.
        env_meta: The env's spaces (the snapshots' networks are built for them).
        seats: The env's seats.
        rng: The draws' generator.
    """

    def __init__(self, folder: Any, env_meta: Any, seats: Sequence[str], rng: np.random.Generator) -> None:
        self.folder = Path(folder)
        self.env_meta = env_meta
        self.seats = list(seats)
        self.rng = rng
        self.random = RandomOpponent(rng)
        self._stamp: Optional[float] = None
        self._pool: list = []
        self._probs = np.zeros(0)
        self._random_share = 1.0
        self._loaded: Dict[str, PolicyOpponent] = {}

    def reseed(self, rng: np.random.Generator) -> None:
        """Draw from ``rng`` from now on (the draws of opponents, and the snapshots' sampled moves)."""
        self.rng = self.random.rng = rng
        for player in self._loaded.values():
            player.reseed(rng)

    def _refresh(self) -> None:
        path = self.folder / LEAGUE_FILE
        try:
            stamp = path.stat().st_mtime_ns
        except FileNotFoundError:
            return  # no snapshot yet: random play until the league's first one
        if stamp == self._stamp:
            return
        state = read_league(self.folder) or {}
        self._stamp = stamp
        self._pool = [str(p) for p in state.get("pool", [])]
        self._probs = np.asarray(state.get("probs", []), dtype=np.float64)
        self._random_share = float(state.get("random_share", 0.0)) if self._pool else 1.0
        self._loaded = {k: v for k, v in self._loaded.items() if k in self._pool}

    def pick(self) -> Any:
        """The opponent of the next game."""
        self._refresh()
        if not self._pool or self.rng.random() < self._random_share:
            return self.random
        name = self._pool[int(self.rng.choice(len(self._pool), p=self._probs / self._probs.sum()))]
        if name not in self._loaded:
            self._loaded[name] = PolicyOpponent.from_checkpoint(
                self.folder / "snapshots" / name, self.env_meta, rng=self.rng
            )
        return self._loaded[name]
