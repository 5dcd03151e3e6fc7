"""Turn-based games (``env.backend: pettingzoo_aec`` / ``openspiel``): PettingZoo AEC envs and OpenSpiel games.

``env.name`` names the game: for ``pettingzoo_aec`` the env module as PettingZoo documents it
(``pettingzoo.classic:connect_four_v3``, ``pettingzoo.classic:tictactoe_v3``, ``texas_holdem_v4``,
``chess_v6``, ``go_v5``) or a ``module:callable`` returning an ``AECEnv``; for ``openspiel`` an OpenSpiel
game name (``connect_four``, ``tic_tac_toe``), run through shimmy's ``OpenSpielCompatibilityV0``.

One seat of every game is the **learner's**; the others are played inside the worker by an **opponent**
(`rlightning.selfplay.opponents`), so each env step is one move of the learner and the opponent's replies:

- the record is the multi-agent record, keyed by seat (``player_0``, ``player_1``, ...). In each game only
  the learner's seat is active (``info["active"]``), so each seat's record holds only its own turns; the
  other seats are done (reward 0, zero observations) for the whole game;
- seats alternate: sub-env ``j``'s learner takes seat ``(j + games played) % seats`` (``learner_seat:
  alternate``, the default), so one policy (``policy.agent_groups: null``: parameters shared by the seats)
  learns to move first and second; ``learner_seat: player_1`` pins it;
- rewards that arrive while the opponent moves, and those of the game's end, go to the learner's last step
  (its own move and the replies are one step);
- masks come from the observation's ``action_mask`` (OpenSpiel's from ``info["action_mask"]``): every
  observation is a Dict ``{observation, action_mask}``, and an illegal move is refused, naming the legal ones.
  A game without masks is refused when the env is built: turn-based games are played with legal moves only.

``env_kwargs`` of this backend (the rest go to the game's constructor):

- ``opponent``: ``random`` (default), ``scripted`` (tic-tac-toe and connect four: win, else block, else the
  centre), ``league`` (snapshots of the learner itself, drawn per game from ``league_dir``'s pool; see
  `rlightning.selfplay`), or a checkpoint folder (a frozen policy);
- ``learner_seat``: ``alternate`` or a seat;
- ``league_dir``: the league's folder (with ``opponent: league``), and ``league``: its settings
  (`rlightning.selfplay.LeagueConfig`).

``info["episode_return"]`` is the learner's return (1 a win, -1 a loss, 0 a draw for the board games),
``info["learner_seat"]`` the seat index per sub-env and ``info["opponent"]`` who it plays.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
from gymnasium import spaces

from rlightning.env.base_env import BaseEnv
from rlightning.env.errors import caller_error
from rlightning.env.multi_agent_env import agent_actions
from rlightning.env.pettingzoo_env import env_module_or_callable
from rlightning.env.suites import MissingSuiteError
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.selfplay.opponents import batch_key
from rlightning.types import EnvMeta, MultiAgentEnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.registry import ENVS

__all__ = ["OpenSpielEnv", "TurnBasedEnv", "make_aec_env"]

_HINT = 'pip install "rlightning[games]"'
#: env_kwargs keys this backend reads (the others go to the game).
OWN_KWARGS = ("opponent", "learner_seat", "league_dir", "league")
MASK = "action_mask"


def _import(module: str, name: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        missing = getattr(err, "name", None) or ""
        tops = (module.split(".")[0], "pettingzoo", "shimmy", "pyspiel", "chess", "rlcard")
        if "." not in missing and missing in tops:
            raise MissingSuiteError(f"game {name!r} needs {missing}, which is not installed ({err}): {_HINT}") from None
        raise


def make_aec_env(name: str, env_kwargs: Optional[Dict[str, Any]] = None) -> Any:
    """One PettingZoo ``AECEnv`` from ``env.name`` (``package:env_module`` or ``module:callable``).

    Raises:
        MissingSuiteError: PettingZoo or the game's package is missing (names the extra).
        ValueError: a bad name, or a parallel-only env (the hint names ``env.backend: pettingzoo``).
    """
    factory = env_module_or_callable(name, "pettingzoo_aec", "pettingzoo.classic:connect_four_v3", _import)
    if not callable(factory):
        if hasattr(factory, "env"):
            factory = factory.env
        elif hasattr(factory, "parallel_env"):
            raise ValueError(
                f"env {name!r} is a parallel (simultaneous-move) PettingZoo env without an AEC env(); use "
                "env.backend: pettingzoo"
            )
    if not callable(factory):
        raise ValueError(f"env {name!r}: {factory!r} is not an AEC env factory")
    env = factory(**dict(env_kwargs or {}))
    from pettingzoo.utils.env import AECEnv, ParallelEnv

    if not isinstance(env, AECEnv):
        hint = "use env.backend: pettingzoo" if isinstance(env, ParallelEnv) else "give a module with env()"
        raise ValueError(f"env {name!r} built a {type(env).__name__}, not a turn-based PettingZoo AECEnv; {hint}")
    return env


def _make_openspiel(name: str, env_kwargs: Optional[Dict[str, Any]] = None) -> Any:
    shimmy = _import("shimmy", name)
    _import("pyspiel", name)
    if not isinstance(name, str) or not name or ":" in name:
        raise ValueError(
            f"the openspiel backend takes env.name as an OpenSpiel game name (e.g. 'connect_four'), got {name!r}"
        )
    import pyspiel

    if name not in pyspiel.registered_names():
        import difflib

        close = difflib.get_close_matches(name, pyspiel.registered_names(), n=3)
        raise ValueError(f"OpenSpiel has no game {name!r}" + (f"; did you mean {', '.join(close)}?" if close else ""))
    kwargs = dict(env_kwargs or {})
    game = pyspiel.load_game(name, kwargs) if kwargs else pyspiel.load_game(name)
    return shimmy.OpenSpielCompatibilityV0(env=game)


def _game_over(env: Any) -> bool:
    agents = list(env.agents)
    return not agents or all(env.terminations.get(a, False) or env.truncations.get(a, False) for a in agents)


@ENVS.register("pettingzoo_aec")
class TurnBasedEnv(BaseEnv):
    """``num_envs`` games of a turn-based env, the learner against an opponent (see the module docstring).

    Raises:
        MissingSuiteError: the game's package is missing.
        ValueError: a bad ``env.name`` or ``env_kwargs`` entry, or a game without action masks.
    """

    multi_agent = True
    """Observations, rewards and flags are dicts keyed by seat (the engines build a `MultiAgentPolicy`)."""

    backend = "pettingzoo_aec"

    @classmethod
    def make_game(cls, name: str, kwargs: Dict[str, Any]) -> Any:
        """One game of ``name``."""
        return make_aec_env(name, kwargs)

    @classmethod
    def split_kwargs(cls, config: EnvConfig) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """``env_kwargs`` as (this backend's options, the game's arguments)."""
        own = {k: v for k, v in config.env_kwargs.items() if k in OWN_KWARGS}
        game = {k: v for k, v in config.env_kwargs.items() if k not in OWN_KWARGS}
        return own, game

    @classmethod
    def prepare(cls, config: EnvConfig) -> Dict[str, Any]:
        """Check in the driver that the game builds, has masks and that the options are valid; the league
        folder is made absolute here (the workers may run elsewhere)."""
        own, game_kwargs = cls.split_kwargs(config)
        game = cls.make_game(config.name, game_kwargs)
        try:
            game.reset(seed=0)
            _check_masks(game, config.name, cls.backend)
        finally:
            game.close()
        opponent = own.get("opponent", "random")
        if opponent == "league":
            from rlightning.selfplay.config import league_config

            league_config(own)  # raises on a bad league section / missing league_dir
            return {"league_dir": str(Path(own["league_dir"]).resolve())}
        if opponent not in ("random", "scripted"):
            if not isinstance(opponent, str):
                raise ValueError(
                    "env_kwargs.opponent must be 'random', 'scripted', 'league' or a checkpoint folder, got "
                    f"{opponent!r}"
                )
            from rlightning.selfplay.checkpoints import check_opponent_checkpoint  # the env package imports no policy

            check_opponent_checkpoint(opponent)
            return {"opponent_dir": str(Path(opponent).resolve())}
        if opponent == "scripted":
            from rlightning.selfplay.opponents import ScriptedOpponent

            ScriptedOpponent(config.name)
        return {}

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
        league_dir: Optional[str] = None,
        opponent_dir: Optional[str] = None,
    ) -> None:
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        own, game_kwargs = self.split_kwargs(config)
        self._games = [self.make_game(config.name, game_kwargs) for _ in range(self.num_envs)]
        self._inner = [getattr(g, "unwrapped", g) for g in self._games]  # state reads skip the wrappers
        self._cache: List[Optional[Tuple[Any, Dict[str, np.ndarray]]]] = [None] * self.num_envs
        first = self._games[0]
        first.reset(seed=None)
        _check_masks(first, config.name, self.backend)
        self._raw_ids = list(first.possible_agents)
        self.agent_ids: Tuple[str, ...] = tuple(str(a) for a in self._raw_ids)
        self.observation_spaces = {str(a): _obs_space(first, a) for a in self._raw_ids}
        self.action_spaces = {str(a): first.action_space(a) for a in self._raw_ids}
        for a, space in self.action_spaces.items():
            if not isinstance(space, spaces.Discrete):
                raise ValueError(
                    f"env {self.env_id}: seat {a!r} has action space {space}; turn-based games need Discrete"
                )
        seat = own.get("learner_seat", "alternate")
        if seat != "alternate" and seat not in self.agent_ids:
            raise ValueError(
                f"env {self.env_id}: env_kwargs.learner_seat must be 'alternate' or one of {list(self.agent_ids)}, "
                f"got {seat!r}"
            )
        self.fixed_seat = None if seat == "alternate" else self.agent_ids.index(seat)
        self.opponent_spec = own.get("opponent", "random")
        self.league_dir = league_dir
        self.opponent_dir = opponent_dir
        self._rng = np.random.default_rng()
        self.opponents: Any = None  # built at the first reset (a league reads its folder then)
        n = self.num_envs
        self._seat = np.zeros(n, dtype=np.int64)
        self._played = np.zeros(n, dtype=np.int64)
        self._moves = np.zeros(n, dtype=np.int64)
        self._opp: List[Any] = [None] * n
        self._acc = np.zeros((n, len(self._raw_ids)), dtype=np.float64)
        self._over = np.zeros(n, dtype=bool)
        self._prev_done: Optional[np.ndarray] = None
        self._needs_reset = True

    # ------------------------------------------------------------------ opponents

    def set_opponent(self, opponent: Any) -> None:
        """Play every game from the next reset against ``opponent`` (an object with ``act(obs) -> actions``)."""
        from rlightning.selfplay.league_file import FixedOpponents

        self.opponents = FixedOpponents(opponent)

    def _build_opponents(self) -> Any:
        from rlightning.selfplay.league_file import FixedOpponents, LeagueOpponents
        from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent, ScriptedOpponent

        spec = self.opponent_spec
        if spec == "random":
            return FixedOpponents(RandomOpponent(self._rng))
        if spec == "scripted":
            return FixedOpponents(ScriptedOpponent(self.config.name, self._rng))
        meta = self.get_metadata(num_envs=1)
        if spec == "league":
            return LeagueOpponents(self.league_dir, meta, self.agent_ids, self._rng)
        return FixedOpponents(PolicyOpponent.from_checkpoint(self.opponent_dir or spec, meta))

    # ------------------------------------------------------------------ one game

    def _observe(self, i: int, raw: Any) -> Dict[str, np.ndarray]:
        """Seat ``raw``'s observation of game ``i`` (kept until the game moves)."""
        cached = self._cache[i]
        if cached is not None and cached[0] == raw:
            return cached[1]
        obs = _observe(self._inner[i], raw, self.observation_spaces[str(raw)])
        self._cache[i] = (raw, obs)
        return obs

    def _move(self, i: int, action: int) -> None:
        """Play ``action`` in game ``i``: its rewards to every seat's sum, whether it is over."""
        inner = self._inner[i]
        inner.step(action)  # legality is checked here: PettingZoo's checking wrappers would only repeat it
        self._cache[i] = None
        rewards = inner.rewards
        for k, raw in enumerate(self._raw_ids):
            self._acc[i, k] += float(rewards.get(raw, 0.0))
        self._over[i] = _game_over(inner)

    def _reset_row(self, i: int, seed: Optional[int]) -> None:
        self._games[i].reset(seed=seed)
        self._cache[i] = None
        seats = len(self._raw_ids)
        self._seat[i] = self.fixed_seat if self.fixed_seat is not None else (i + self._played[i]) % seats
        self._played[i] += 1
        self._moves[i] = 0
        self._acc[i] = 0.0
        self._over[i] = False
        self._opp[i] = self.opponents.pick()

    def _start_games(self, rows: List[int], seed: Optional[int] = None) -> None:
        """New games in ``rows``, the opponents' opening moves played; a game the opponent ends before the learner
        moved (a fold in poker) is dealt again: the learner had no decision in it."""
        for attempt in range(100):
            for i in rows:
                self._reset_row(i, None if seed is None or attempt else int(seed) + i)
            self._play_opponents(rows)
            rows = [i for i in rows if self._over[i]]
            if not rows:
                return
        raise RuntimeError(f"env {self.env_id}: 100 games in a row ended before the learner's first move")

    def _opponent_to_move(self, i: int) -> bool:
        return not self._over[i] and self._inner[i].agent_selection != self._raw_ids[self._seat[i]]

    def _play_opponents(self, rows: List[int]) -> None:
        """Opponent moves in ``rows`` until each is the learner's turn or over (one batched call per opponent
        per round, and per seat where the opponent acts differently by seat: `opponents.batch_key`)."""
        pending = [i for i in rows if self._opponent_to_move(i)]
        while pending:
            by: Dict[Tuple[int, Any], List[int]] = {}
            for i in pending:
                opp, raw = self._opp[i], self._inner[i].agent_selection
                by.setdefault((id(opp), batch_key(opp, str(raw))), []).append(i)
            for group in by.values():
                raws = [self._inner[i].agent_selection for i in group]
                obs = [self._observe(i, raw) for i, raw in zip(group, raws)]
                batch = {k: np.stack([o[k] for o in obs]) for k in obs[0]}
                actions = self._opp[group[0]].act(batch, seat=str(raws[0]))
                for i, a, o in zip(group, actions, obs):
                    if not o[MASK][int(a)]:
                        raise RuntimeError(
                            f"env {self.env_id}: opponent {self._opp[i].name!r} chose illegal move {int(a)} "
                            f"(legal: {np.flatnonzero(o[MASK]).tolist()})"
                        )
                    self._move(i, int(a))
            pending = [i for i in pending if self._opponent_to_move(i)]

    # ------------------------------------------------------------------ the BaseEnv API

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> MultiAgentEnvRet:
        """Start a game in every sub-env (sub-env ``j`` seeded with ``seed + j``); the opponent moves first where
        the learner has a later seat."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise caller_error(ValueError(f"env {self.env_id}: seed must be None or an int >= 0, got {seed!r}"))
        if seed is not None:
            self._rng = np.random.default_rng(int(seed))
            if self.opponents is not None:
                self.opponents.reseed(self._rng)
        if self.opponents is None:
            self.opponents = self._build_opponents()
        self._played[:] = 0
        self._start_games(list(range(self.num_envs)), seed)
        self._prev_done = None
        self._needs_reset = False
        ep_return, ep_length = self.episodes.reset()
        n = self.num_envs
        zeros = {a: np.zeros(n, dtype=np.float32) for a in self.agent_ids}
        flags = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        return self._ret(zeros, flags, dict(flags), ep_return, ep_length, np.zeros(n, dtype=bool))

    def step(self, policy_resp: PolicyResponse) -> MultiAgentEnvRet:
        """The learner's move in every game, then the opponents' replies; games that ended on the last step start
        again instead (their actions ignored).

        Raises:
            ValueError: a missing or unknown seat's action, or an illegal move of the learner (the legal ones named).
        """
        try:
            action = agent_actions(self, policy_resp, self._needs_reset)
            missing = [a for a in self.agent_ids if a not in action]
            if missing:
                raise ValueError(
                    f"env {self.env_id}: no action for seat(s) {missing}; seats are {list(self.agent_ids)}"
                )
            moves = self._learner_moves(action)
        except Exception as err:  # noqa: BLE001
            caller_error(err)
            raise
        n = self.num_envs
        prev = self._prev_done
        stepped = np.ones(n, dtype=bool) if prev is None else ~prev
        for i in np.flatnonzero(stepped):
            self._acc[i] = 0.0
            self._moves[i] += 1
            self._move(i, int(moves[i]))
        self._play_opponents(np.flatnonzero(stepped).tolist())
        if prev is not None:
            self._start_games(np.flatnonzero(prev).tolist())
        reward = {a: np.zeros(n, dtype=np.float32) for a in self.agent_ids}
        term = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        trunc = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        limit = self.config.max_episode_steps
        for i in range(n):
            if not stepped[i]:
                continue
            learner = self.agent_ids[self._seat[i]]
            reward[learner][i] = self._acc[i, self._seat[i]]
            raw = self._raw_ids[self._seat[i]]
            ended = self._over[i] and not self._inner[i].truncations.get(raw, False)
            cut = not ended and (self._over[i] or (limit is not None and self._moves[i] >= limit))
            term[learner][i] = ended
            trunc[learner][i] = cut
            for a in self.agent_ids:
                if a != learner:
                    term[a][i] = True
        done = np.logical_and.reduce([term[a] | trunc[a] for a in self.agent_ids]) & stepped
        self._prev_done = done if done.any() else None
        team = np.sum([reward[a] for a in self.agent_ids], axis=0).astype(np.float32)
        ep_return, ep_length = self.episodes.update(team, done)
        return self._ret(reward, term, trunc, ep_return, ep_length, done)

    def _learner_moves(self, action: Dict[str, Any]) -> np.ndarray:
        n = self.num_envs
        moves = np.zeros(n, dtype=np.int64)
        prev = self._prev_done
        for i in range(n):
            if prev is not None and prev[i]:
                continue
            seat = self.agent_ids[self._seat[i]]
            raw_action = np.asarray(action[seat]).reshape(-1)
            if raw_action.shape[0] != n:
                raise ValueError(
                    f"env {self.env_id}: seat {seat!r} has {raw_action.shape[0]} actions, expected num_envs={n}"
                )
            a = raw_action[i]
            mask = self._observe(i, self._raw_ids[self._seat[i]])[MASK]
            whole = np.issubdtype(np.asarray(a).dtype, np.integer) or float(a).is_integer()
            if not whole or not 0 <= int(a) < len(mask):
                raise ValueError(
                    f"env {self.env_id}: seat {seat!r} action {a!r} in game {i} is outside {self.action_spaces[seat]}"
                )
            if not mask[int(a)]:
                raise ValueError(
                    f"env {self.env_id}: seat {seat!r} played illegal move {int(a)} in game {i}; legal moves: "
                    f"{np.flatnonzero(mask).tolist()} (the observation's action_mask; act under it)"
                )
            moves[i] = int(a)
        return moves

    def _ret(self, reward, term, trunc, ep_return, ep_length, done_rows) -> MultiAgentEnvRet:
        n = self.num_envs
        obs = {
            a: {k: np.zeros((n,) + s.shape, dtype=s.dtype) for k, s in self.observation_spaces[a].spaces.items()}
            for a in self.agent_ids
        }
        active = {a: np.zeros(n, dtype=bool) for a in self.agent_ids}
        for i in range(n):
            k = int(self._seat[i])
            a = self.agent_ids[k]
            if not done_rows[i]:
                active[a][i] = True
            if not self._over[i]:
                for key, value in self._observe(i, self._raw_ids[k]).items():
                    obs[a][key][i] = value
        return MultiAgentEnvRet(
            env_id=self.env_id,
            observation=obs,
            last_reward=reward,
            last_terminated=term,
            last_truncated=trunc,
            info={
                "episode_return": ep_return,
                "episode_length": ep_length,
                "active": active,
                "learner_seat": self._seat.copy(),
                "opponent": [getattr(o, "name", "?") for o in self._opp],
            },
        )

    def get_metadata(self, num_envs: Optional[int] = None) -> EnvMeta:
        """Dict spaces keyed by seat: every seat's ``{observation, action_mask}`` and its Discrete moves."""
        return EnvMeta(
            env_id=self.env_id,
            action_space=spaces.Dict(dict(self.action_spaces)),
            observation_space=spaces.Dict(dict(self.observation_spaces)),
            num_envs=self.num_envs if num_envs is None else num_envs,
        )

    def observe_seat(self, i: int, seat: str) -> Dict[str, np.ndarray]:
        """Seat ``seat``'s observation of game ``i`` now (also after the game ended: its final position)."""
        raw = self._raw_ids[self.agent_ids.index(seat)]
        return _observe(self._inner[i], raw, self.observation_spaces[seat])

    def render_game(self, i: int = 0) -> Any:
        """Sub-env ``i``'s board: the game's own ``render()`` (text or an RGB frame, as its ``render_mode``)."""
        return self._games[i].render()

    def close(self) -> None:
        """Close every game."""
        for game in self._games:
            game.close()

    @classmethod
    def extend_engine(cls, engine: Any) -> None:
        """With ``opponent: league``: the league's hook (snapshots, evaluation, Elo) runs before each iteration."""
        if engine.config.env.env_kwargs.get("opponent") == "league":
            from rlightning.selfplay.league import attach_league

            attach_league(engine)


@ENVS.register("openspiel")
class OpenSpielEnv(TurnBasedEnv):
    """An OpenSpiel game through shimmy (``env.name``: the game's name; ``env_kwargs``: its parameters)."""

    backend = "openspiel"

    @classmethod
    def make_game(cls, name: str, kwargs: Dict[str, Any]) -> Any:
        """One game of ``name`` through shimmy."""
        return _make_openspiel(name, kwargs)


# ---------------------------------------------------------------------- observations and masks


def _mask_of(game: Any, raw: Any) -> Optional[np.ndarray]:
    obs = game.observe(raw)
    if isinstance(obs, dict) and MASK in obs:
        return np.asarray(obs[MASK])
    info = game.infos.get(raw, {}) if isinstance(getattr(game, "infos", None), dict) else {}
    return np.asarray(info[MASK]) if MASK in info else None


def _check_masks(game: Any, name: str, backend: str) -> None:
    raw = game.agent_selection
    if _mask_of(game, raw) is None:
        raise ValueError(
            f"game {name!r} ({backend}) gives no action mask (an 'action_mask' observation key or info entry); "
            "turn-based games are played with legal moves only, so this backend needs one"
        )


def _obs_space(game: Any, raw: Any) -> spaces.Dict:
    space = game.observation_space(raw)
    n = int(game.action_space(raw).n)
    if isinstance(space, spaces.Dict) and "observation" in space.spaces:
        board = space.spaces["observation"]
    else:
        board = space
    if isinstance(board, spaces.Box) and board.dtype == np.float64:
        board = spaces.Box(board.low.astype(np.float32), board.high.astype(np.float32), board.shape, np.float32)
    return spaces.Dict({"observation": board, MASK: spaces.Box(0, 1, (n,), np.int8)})


def _observe(game: Any, raw: Any, space: spaces.Dict) -> Dict[str, np.ndarray]:
    obs = game.observe(raw)
    board = obs["observation"] if isinstance(obs, dict) else obs
    mask = obs[MASK] if isinstance(obs, dict) and MASK in obs else _mask_of(game, raw)
    return {
        "observation": np.asarray(board, dtype=space.spaces["observation"].dtype),
        MASK: np.asarray(mask, dtype=np.int8),
    }
