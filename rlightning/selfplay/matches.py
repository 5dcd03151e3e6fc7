"""Games between two players of a turn-based game, per seat: what evaluation and Elo ratings are made of.

A match runs the game's own env backend (`rlightning.env.turn_based_env.TurnBasedEnv`, in this process) with
the learner's seat pinned and the other seats played by ``opponent``; ``player`` answers the learner's turns.
A player is anything with ``act(obs, seat=None) -> actions`` (`rlightning.selfplay.opponents`).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from rlightning.types import MultiAgentPolicyResponse

__all__ = ["MatchResult", "match_env", "play_match"]


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
            action[seat] = np.asarray(player.act(ret.observation[seat], seat=seat)).reshape(-1)
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
