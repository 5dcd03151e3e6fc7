"""Games between two players of a turn-based game, per seat: what evaluation and Elo ratings are made of.

A match runs the game's own env backend (`rlightning.env.turn_based_env.TurnBasedEnv`, in this process) with
the learner's seat pinned and the other seats played by ``opponent``; ``player`` answers the learner's turns.
A player is anything with ``act(obs, seat=None) -> actions`` (`rlightning.selfplay.opponents`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np

from rlightning.types import MultiAgentPolicyResponse

__all__ = ["GamePlay", "MatchResult", "board_text", "match_env", "play_game", "play_match"]


class MatchResult(dict):
    """``{"win": w, "draw": d, "loss": l}`` counts of the player's games (from its side)."""

    @property
    def games(self) -> int:
        """Games played."""
        return int(self["win"] + self["draw"] + self["loss"])

    def rates(self) -> Dict[str, float]:
        """Each outcome's share of the games."""
        n = max(self.games, 1)
        return {k: self[k] / n for k in ("win", "draw", "loss")}


def match_env(env_config: Any, seat: str, num_envs: int) -> Any:
    """A turn-based env of ``env_config``'s game in this process with the learner in ``seat``.

    Raises:
        ValueError: ``seat`` is not one of the game's seats.
    """
    from rlightning.env.turn_based_env import OWN_KWARGS
    from rlightning.env.worker_slot import resolve_env_class

    kwargs = {k: v for k, v in env_config.env_kwargs.items() if k not in OWN_KWARGS}
    kwargs.update(opponent="random", learner_seat=seat)
    cfg = env_config.model_copy(update={"env_kwargs": kwargs, "num_envs": int(num_envs)})
    return resolve_env_class(cfg)(cfg)


def play_match(
    env_config: Any,
    player: Any,
    opponent: Any,
    games: int,
    seat: str,
    seed: Optional[int] = None,
    max_steps: int = 100_000,
) -> MatchResult:
    """``games`` games of ``player`` in ``seat`` against ``opponent`` in the others (played side by side).

    Args:
        env_config: The game's `EnvConfig` (its ``env_kwargs.opponent`` and ``learner_seat`` are replaced).
        player: Acts on the learner seat's observations.
        opponent: Plays the other seats.
        games: Games to count (the first ``games`` to finish).
        seat: The player's seat.
        seed: Seeds the games and the random opponents' draws.
        max_steps: A bound on the player's moves (a game that never ends raises).

    Raises:
        ValueError: ``games`` below 1, or a bad seat.
        RuntimeError: the games did not finish within ``max_steps`` moves.
    """
    if isinstance(games, bool) or not isinstance(games, int) or games < 1:
        raise ValueError(f"games must be an int >= 1, got {games!r}")
    env = match_env(env_config, seat, min(games, 64))
    try:
        env.set_opponent(opponent)
        ret = env.reset(seed=seed)
        result = MatchResult(win=0, draw=0, loss=0)
        for _ in range(max_steps):
            action = {a: np.zeros(env.num_envs, dtype=np.int64) for a in env.agent_ids}
            action[seat] = _act_on_live_rows(player, ret, seat)
            ret = env.step(MultiAgentPolicyResponse(env_id=env.env_id, action=action))
            done = np.logical_and.reduce([ret.last_terminated[a] | ret.last_truncated[a] for a in env.agent_ids])
            for r in np.asarray(ret.info["episode_return"])[done]:
                if result.games < games:
                    result["win" if r > 0 else "loss" if r < 0 else "draw"] += 1
            if result.games >= games:
                return result
        raise RuntimeError(f"play_match: {games} games did not finish within {max_steps} moves")
    finally:
        env.close()


def _act_on_live_rows(player: Any, ret: Any, seat: str) -> np.ndarray:
    """The player's moves in the games where ``seat`` is to move (``info["active"]``); 0 in the others.

    A game that ended on the last step restarts on this one and ignores its action: its row shows an empty board
    and no legal move, which is not a position to ask a player about (win-or-block play has no move there)."""
    obs = ret.observation[seat]
    live = np.asarray(ret.info["active"][seat], dtype=bool)
    moves = np.zeros(live.shape[0], dtype=np.int64)
    if live.all():
        moves[:] = np.asarray(player.act(obs, seat=seat)).reshape(-1)
    elif live.any():
        moves[live] = np.asarray(player.act({k: np.asarray(v)[live] for k, v in obs.items()}, seat=seat)).reshape(-1)
    return moves


def board_text(planes: np.ndarray, marks: str = "XO") -> str:
    """A two-plane board (``[rows, cols, 2]``: the seat's pieces, the other side's) as text: X, O and dots."""
    planes = np.asarray(planes)
    rows = []
    for r in range(planes.shape[0]):
        rows.append(" ".join(marks[0] if p[0] else marks[1] if p[1] else "." for p in planes[r]))
    return "\n".join(rows)


class GamePlay:
    """One game: its ``frames`` (text boards, X the player, O the opponent), the player's ``seat`` and ``result``
    (win, draw or loss). Shown in a notebook as the boards side by side."""

    def __init__(self, frames: List[str], seat: str, result: str, opponent: str) -> None:
        self.frames = frames
        self.seat = seat
        self.result = result
        self.opponent = opponent

    def __repr__(self) -> str:
        who = f"seat={self.seat!r}, opponent={self.opponent!r}"
        return f"GamePlay({who}, result={self.result!r}, {len(self.frames)} frames)"

    def _repr_html_(self) -> str:
        import html

        boards = "".join(
            f"<pre style='display:inline-block;margin:0 12px 8px 0;line-height:1.1'>{html.escape(f)}</pre>"
            for f in self.frames
        )
        head = f"<b>{html.escape(self.seat)} (X) against {html.escape(self.opponent)} (O): {self.result}</b><br>"
        return f"<div class='rl-game'>{head}{boards}</div>"


def play_game(env_config: Any, player: Any, opponent: Any, seat: str, seed: Optional[int] = None) -> GamePlay:
    """One game of ``player`` in ``seat`` against ``opponent``, a text board after each of its moves (with the
    replies).

    Raises:
        ValueError: a game whose observation is not a two-plane board (tic-tac-toe, connect four, ...).
    """
    env = match_env(env_config, seat, 1)
    try:
        shape = env.observation_spaces[seat]["observation"].shape
        if len(shape) != 3 or shape[-1] != 2:
            raise ValueError(
                f"play shows games whose observation is a two-plane board [rows, cols, 2] (tic-tac-toe, connect "
                f"four); {env_config.name!r} observes {shape}"
            )
        env.set_opponent(opponent)
        ret = env.reset(seed=seed)
        frames = [board_text(env.observe_seat(0, seat)["observation"])]
        for _ in range(10_000):
            action = {a: np.zeros(1, dtype=np.int64) for a in env.agent_ids}
            action[seat] = np.asarray(player.act(ret.observation[seat], seat=seat)).reshape(-1)
            ret = env.step(MultiAgentPolicyResponse(env_id=env.env_id, action=action))
            frames.append(board_text(env.observe_seat(0, seat)["observation"]))
            if ret.last_terminated[seat][0] or ret.last_truncated[seat][0]:
                r = float(ret.info["episode_return"][0])
                result = "win" if r > 0 else "loss" if r < 0 else "draw"
                return GamePlay(frames, seat, result, getattr(opponent, "name", type(opponent).__name__))
        raise RuntimeError("play_game: the game did not end within 10,000 moves")
    finally:
        env.close()


def resolve_player(spec: Any, env_config: Any, env_meta: Any, league: Any = None) -> Any:
    """An opponent from ``spec``: an object with ``act``, ``"random"``, ``"scripted"``, a snapshot of ``league``
    by name (``"iter_000010"``, or ``"latest"``), or a checkpoint folder.

    Raises:
        ValueError: a snapshot name the league does not have (its snapshots named), or no league for one.
    """
    from pathlib import Path

    from rlightning.selfplay.opponents import PolicyOpponent, RandomOpponent, ScriptedOpponent

    if hasattr(spec, "act"):
        return spec
    if spec == "random":
        return RandomOpponent()
    if spec == "scripted":
        return ScriptedOpponent(env_config.name)
    names = [s["name"] for s in league.snapshots] if league is not None else []
    if spec == "latest" and names:
        spec = names[-1]
    if spec in names:
        return league.player(spec, env_meta)
    if isinstance(spec, (str, Path)) and Path(spec).is_dir():
        return PolicyOpponent.from_checkpoint(spec, env_meta, deterministic=True)
    raise ValueError(
        f"opponent {spec!r}: give 'random', 'scripted', a checkpoint folder, or a league snapshot "
        f"({', '.join(names) if names else 'this run has no league'})"
    )
