"""`League`: the driver's side of self-play, a hook the engine runs before each iteration.

Every ``snapshot_every`` iterations (the first before iteration 0) the learner is saved as a **snapshot**: an
ordinary checkpoint folder (``<league_dir>/snapshots/iter_000010``, loadable by `rlightning.load_policy` and
``Run.load``). Then, with ``eval_games`` > 0, the new snapshot plays ``eval_games`` games in each seat

- against random play and the scripted opponent (where the game has one): win / draw / loss per seat, in the
  metrics as ``league/random/<seat>/win`` ... and in the file's ``evals``;
- against every snapshot of the pool (sampled moves on both sides): the **win-rate matrix** and the **Elo
  ratings**, fitted to all the league's games at once (`elo_fit`: maximum likelihood on the Elo scale, random
  play the anchor fixed at ``initial_elo``, one virtual draw of each snapshot against it). A fit rather than
  K-factor updates: with evaluation matches of tens of games, ``K`` points per game of surprise sent ratings
  from 840 to 3131 in one match; the fit moves a rating only as far as the results support.

The pool is the newest ``pool_size`` snapshots; their probabilities of being met (``latest``, ``uniform`` or
``pfsp`` over the newest snapshot's scores against them) go to ``league.json``, which the env workers read
(`rlightning.selfplay.league_file`). The file holds the whole league, so a resumed run (the same league
folder) carries on with it: `League.load`.
"""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np

from rlightning.selfplay.config import LeagueConfig, league_config
from rlightning.selfplay.elo import elo_fit, pfsp_weights, score
from rlightning.selfplay.league_file import read_league, write_league
from rlightning.selfplay.matches import play_match
from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent, ScriptedOpponent, scripted_game
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

__all__ = ["League", "attach_league"]

RANDOM = "random"


class League:
    """The league's state and its updates (see the module docstring).

    Args:
        config: Its `LeagueConfig`.
        folder: The league folder (snapshots and ``league.json``).
        env_config: The game's `EnvConfig` (evaluation matches are played on it).
        policy_config: The learner's policy config (snapshots are built from it).
        seed: Seeds the evaluation games.
    """

    def __init__(self, config: LeagueConfig, folder: Any, env_config: Any, policy_config: Any, seed: int = 0) -> None:
        self.config = config
        self.folder = Path(folder)
        self.env_config = env_config
        self.policy_config = policy_config
        self.seed = int(seed)
        self.snapshots: List[Dict[str, Any]] = []  # name, iteration, elo
        self.matrix: Dict[str, Dict[str, List[int]]] = {}  # a -> b -> [wins, draws, losses] of a against b
        self.evals: List[Dict[str, Any]] = []
        self.random_elo = float(config.initial_elo)
        self._players: Dict[str, PolicyOpponent] = {}
        self.load()

    # ------------------------------------------------------------------ state

    @property
    def pool(self) -> List[str]:
        """The snapshots the learner is matched against (the newest ``pool_size``)."""
        return [s["name"] for s in self.snapshots[-self.config.pool_size :]]

    def ratings(self) -> Dict[str, float]:
        """Elo rating by player (the snapshots and ``random``)."""
        out = {RANDOM: self.random_elo}
        out.update({s["name"]: float(s["elo"]) for s in self.snapshots})
        return out

    def win_rate(self, a: str, b: str) -> float:
        """``a``'s points per game against ``b`` (NaN when they have not played)."""
        wdl = self.matrix.get(a, {}).get(b)
        return score(*wdl) if wdl else float("nan")

    def probabilities(self) -> np.ndarray:
        """The chance of meeting each pool snapshot (``config.sampling``)."""
        pool = self.pool
        if not pool:
            return np.zeros(0)
        if self.config.sampling == "latest":
            return np.eye(len(pool))[-1]
        if self.config.sampling == "uniform":
            return np.full(len(pool), 1.0 / len(pool))
        newest = pool[-1]
        rates = [self.win_rate(newest, b) for b in pool]
        return pfsp_weights(rates, self.config.pfsp_weighting, self.config.pfsp_p)

    def state(self) -> Dict[str, Any]:
        """What ``league.json`` holds."""
        return {
            "snapshots": self.snapshots,
            "pool": self.pool,
            "probs": self.probabilities().tolist(),
            "random_share": self.config.random_share,
            "random_elo": self.random_elo,
            "matrix": self.matrix,
            "evals": self.evals,
            "config": self.config.model_dump(),
        }

    def save(self) -> Path:
        """Write ``league.json`` (atomically)."""
        return write_league(self.folder, self.state())

    def load(self) -> bool:
        """Read the league folder's ``league.json`` (a resumed run); False when there is none."""
        state = read_league(self.folder)
        if state is None:
            return False
        self.snapshots = [dict(s) for s in state.get("snapshots", [])]
        self.matrix = {a: {b: list(v) for b, v in row.items()} for a, row in state.get("matrix", {}).items()}
        self.evals = list(state.get("evals", []))
        self.random_elo = float(state.get("random_elo", self.config.initial_elo))
        return True

    # ------------------------------------------------------------------ players

    def player(self, name: str, env_meta: Any) -> PolicyOpponent:
        """The snapshot ``name`` as a player (sampled moves), loaded once."""
        if name not in self._players:  # seeded from the run's seed and the snapshot's name: evaluations repeat
            rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
            self._players[name] = PolicyOpponent.from_checkpoint(self.folder / "snapshots" / name, env_meta, rng=rng)
        return self._players[name]

    def _record(self, a: str, b: str, result: Dict[str, int]) -> None:
        w, d, losses = int(result["win"]), int(result["draw"]), int(result["loss"])
        row = self.matrix.setdefault(a, {}).setdefault(b, [0, 0, 0])
        row[0] += w
        row[1] += d
        row[2] += losses
        back = self.matrix.setdefault(b, {}).setdefault(a, [0, 0, 0])
        back[0] += losses
        back[1] += d
        back[2] += w

    def rate(self, a: str, b: str, result: Dict[str, int]) -> None:
        """A match of ``a`` against ``b`` into the matrix, and every rating fitted again to all the games
        (`elo_fit`; ``random`` stays fixed; snapshots without games keep theirs)."""
        self._record(a, b, result)
        fitted = elo_fit(self.matrix, RANDOM, self.random_elo, prior_draws=1.0)
        for snap in self.snapshots:
            if snap["name"] in fitted:
                snap["elo"] = fitted[snap["name"]]

    # ------------------------------------------------------------------ growing

    def add_snapshot(self, name: str, iteration: int) -> None:
        """A new snapshot (already saved under ``snapshots/name``), rated as the newest one was."""
        elo = float(self.snapshots[-1]["elo"]) if self.snapshots else float(self.config.initial_elo)
        self.snapshots.append({"name": name, "iteration": int(iteration), "elo": elo})

    def evaluate(self, name: str, env_meta: Any) -> Dict[str, float]:
        """Matches of snapshot ``name``: per seat against random play and the scripted opponent (greedy moves),
        and against the pool's other snapshots (sampled moves, rated). Returns the metrics."""
        games = self.config.eval_games
        if games == 0:
            return {}
        seats = [str(a) for a in env_meta.action_space.spaces]
        me = self.player(name, env_meta)
        metrics: Dict[str, float] = {}
        rng = np.random.default_rng(self.seed + len(self.snapshots))
        fixed: Dict[str, Any] = {RANDOM: RandomOpponent(rng)}
        if scripted_game(self.env_config.name) is not None:
            fixed["scripted"] = ScriptedOpponent(self.env_config.name, rng)
        record: Dict[str, Any] = {"snapshot": name}
        for label, opponent in fixed.items():
            total = {"win": 0, "draw": 0, "loss": 0}
            for seat in seats:
                me.deterministic = True
                result = play_match(self.env_config, me, opponent, games, seat, seed=int(rng.integers(2**31)))
                record[f"{label}/{seat}"] = result.rates()
                for k, v in result.rates().items():
                    metrics[f"league/{label}/{seat}/{k}"] = v
                for k in total:
                    total[k] += result[k]
            if label == RANDOM:
                self.rate(name, RANDOM, total)
        me.deterministic = False
        for other in self.pool:
            if other == name:
                continue
            them = self.player(other, env_meta)
            them.deterministic = False
            total = {"win": 0, "draw": 0, "loss": 0}
            for seat in seats:
                result = play_match(self.env_config, me, them, games, seat, seed=int(rng.integers(2**31)))
                for k in total:
                    total[k] += result[k]
            self.rate(name, other, total)
        self.evals.append(record)
        metrics["league/elo"] = float(self.ratings()[name])
        metrics["league/snapshots"] = float(len(self.snapshots))
        return metrics

    def before_iteration(self, engine: Any) -> Optional[Dict[str, float]]:
        """The engine's hook: a snapshot (and its evaluation) every ``snapshot_every`` iterations."""
        it = int(engine.iteration)
        if it % self.config.snapshot_every:
            return None
        name = f"iter_{it:06d}"
        if any(s["name"] == name for s in self.snapshots):
            return None  # a resumed run at an iteration already in the league
        engine.save(self.folder / "snapshots" / name)
        self.add_snapshot(name, it)
        metrics = self.evaluate(name, engine.env_metas[0])
        for old in [p for p in self._players if p not in self.pool]:
            del self._players[old]
        self.save()
        logger.info("league: snapshot %s (%d in the pool)", name, len(self.pool))
        return metrics


def attach_league(engine: Any) -> League:
    """Build the `League` of ``engine``'s game (``env_kwargs.league_dir`` / ``league``) and hook it into the
    engine (``engine.league``; it runs before each iteration).

    Raises:
        ValueError: no ``league_dir`` or bad league settings.
    """
    from rlightning.env.turn_based_env import TurnBasedEnv

    own, _ = TurnBasedEnv.split_kwargs(engine.config.env)
    config = league_config(own)
    league = League(
        config, Path(own["league_dir"]).resolve(), engine.config.env, engine.config.policy, engine.config.seed
    )
    engine.league = league
    engine.step_hooks.append(league.before_iteration)
    return league
