"""Opponents of a turn-based game: who plays the seats the learner does not.

An opponent acts on a batch of one seat's observations (``{"observation": [k, ...], "action_mask": [k, n]}``)
and returns ``[k]`` legal actions:

- `RandomOpponent`: uniform over the legal moves;
- `ScriptedOpponent`: tic-tac-toe and connect four: win now if it can, else block the other side's win, else
  the most central legal move (ties at random);
- `PolicyOpponent`: a frozen snapshot of a policy (an ordinary checkpoint folder, or weights in memory),
  sampling from its masked distribution.

`resolve_opponent` turns ``env_kwargs.opponent`` into one of them; ``"league"`` becomes a `LeagueOpponents`
(`rlightning.selfplay.league_file`), which draws a snapshot of the league per episode.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np

__all__ = [
    "FIXED_OPPONENTS",
    "SCRIPTED_GAMES",
    "PolicyOpponent",
    "RandomOpponent",
    "ScriptedOpponent",
    "batch_key",
    "scripted_game",
]

#: The opponents ``env_kwargs.opponent`` names without a path.
FIXED_OPPONENTS = ("random", "scripted", "league")


def batch_key(opponent: Any, seat: str) -> Any:
    """What an opponent's moves for ``seat`` depend on besides the observation: seats with the same key are
    answered in one batched call. None for opponents that act alike in every seat (random and scripted play read
    the board from the mover's side); a policy's group for `PolicyOpponent` (seats sharing parameters share it)."""
    key = getattr(opponent, "batch_key", None)
    return key(seat) if callable(key) else seat


class RandomOpponent:
    """Uniform over the legal moves of each row (``rng``: a numpy Generator)."""

    name = "random"

    def __init__(self, rng: Optional[np.random.Generator] = None) -> None:
        self.rng = rng if rng is not None else np.random.default_rng()

    def act(self, obs: Dict[str, np.ndarray], seat: Optional[str] = None) -> np.ndarray:
        """``[k]`` legal actions for a batch of observations with their ``action_mask``."""
        mask = np.asarray(obs["action_mask"], dtype=bool)
        noise = self.rng.random(mask.shape)
        return np.where(mask, noise, -1.0).argmax(axis=1)

    def batch_key(self, seat: str) -> None:
        """Random play is the same in every seat."""
        return None


# ---------------------------------------------------------------------------------------------- scripted play

#: Games with a scripted opponent, by the name parts that identify them, and their board (rows, cols, k in a row).
SCRIPTED_GAMES = {"tictactoe": (3, 3, 3), "connect_four": (6, 7, 4)}


def scripted_game(name: str) -> Optional[str]:
    """The `SCRIPTED_GAMES` key of an env name (``pettingzoo.classic:tictactoe_v3`` -> ``tictactoe``), or None."""
    low = str(name).lower().replace("tic_tac_toe", "tictactoe")
    for game in SCRIPTED_GAMES:
        if game in low:
            return game
    return None


def _lines(rows: int, cols: int, k: int) -> np.ndarray:
    """Every k-in-a-row line of the board as flat cell indices ``[L, k]``."""
    out = []
    for r in range(rows):
        for c in range(cols):
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + i * dr, c + i * dc) for i in range(k)]
                if all(0 <= rr < rows and 0 <= cc < cols for rr, cc in cells):
                    out.append([rr * cols + cc for rr, cc in cells])
    return np.asarray(out, dtype=np.int64)


class ScriptedOpponent:
    """Win if a legal move wins, else block the other side's winning move, else the most central legal move.

    Reads PettingZoo's board planes (``observation[..., 0]``: the mover's pieces, ``[..., 1]``: the other
    side's). Tic-tac-toe: action ``a`` is the observation's cell ``[a // 3, a % 3]``; connect four: a
    column (the piece falls to the lowest empty row).

    Raises:
        ValueError: a game without a scripted opponent (the ones with one are named).
    """

    name = "scripted"

    def __init__(self, game: str, rng: Optional[np.random.Generator] = None) -> None:
        key = scripted_game(game)
        if key is None:
            raise ValueError(
                f"opponent 'scripted' plays {sorted(SCRIPTED_GAMES)}; {game!r} has none (use opponent 'random', "
                "'league' or a checkpoint folder)"
            )
        self.game = key
        self.rows, self.cols, k = SCRIPTED_GAMES[key]
        self.lines = _lines(self.rows, self.cols, k)
        self.rng = rng if rng is not None else np.random.default_rng()
        centre_r, centre_c = (self.rows - 1) / 2, (self.cols - 1) / 2
        if key == "tictactoe":
            pos = [(a // 3, a % 3) for a in range(9)]  # action a is the observation's cell [a // 3, a % 3]
        else:
            pos = [(centre_r, a) for a in range(self.cols)]
        self.centrality = -np.asarray([abs(r - centre_r) + abs(c - centre_c) for r, c in pos], dtype=np.float64)

    def _cell(self, board: np.ndarray, action: int) -> Optional[int]:
        """The flat (row-major) cell ``action`` fills on ``board`` (``[rows, cols]`` occupancy), or None."""
        if self.game == "tictactoe":
            r, c = action // 3, action % 3
            return None if board[r, c] else r * self.cols + c
        empty = np.flatnonzero(board[:, action] == 0)
        return None if empty.size == 0 else int(empty[-1]) * self.cols + action

    def _wins(self, mine: np.ndarray, cell: int) -> bool:
        flat = mine.reshape(-1).copy()
        flat[cell] = 1
        return bool((flat[self.lines].sum(axis=1) == self.lines.shape[1]).any())

    def act(self, obs: Dict[str, np.ndarray], seat: Optional[str] = None) -> np.ndarray:
        """``[k]`` legal actions (see the class docstring)."""
        boards = np.asarray(obs["observation"])
        masks = np.asarray(obs["action_mask"], dtype=bool)
        out = np.empty(len(masks), dtype=np.int64)
        for i, (planes, mask) in enumerate(zip(boards, masks)):
            mine, theirs = planes[..., 0] > 0, planes[..., 1] > 0
            occupied = mine | theirs
            legal = np.flatnonzero(mask)
            cells = {int(a): self._cell(occupied, int(a)) for a in legal}
            choice = next((a for a, c in cells.items() if c is not None and self._wins(mine, c)), None)
            if choice is None:
                choice = next((a for a, c in cells.items() if c is not None and self._wins(theirs, c)), None)
            if choice is None:
                score = self.centrality[legal] + 1e-3 * self.rng.random(len(legal))
                choice = int(legal[int(np.argmax(score))])
            out[i] = choice
        return out

    def batch_key(self, seat: str) -> None:
        """The board planes are the mover's: the same play in every seat."""
        return None


# ---------------------------------------------------------------------------------------------- frozen policies


class PolicyOpponent:
    """A frozen policy: a `MultiAgentPolicy` (eval role) whose group of the seat it plays acts.

    Args:
        policy: The built policy holding the snapshot's weights (``policies`` by group, ``groups`` by agent).
        name: What the league calls it (a snapshot's folder name).
        deterministic: The most likely legal move (True) or a sample of the masked distribution (False).
    """

    def __init__(self, policy: Any, name: str, deterministic: bool = False) -> None:
        self.policy = policy
        self.name = name
        self.deterministic = deterministic
        self.group_of = {a: g for g, members in policy.groups.items() for a in members}
        self._kwargs: Dict[str, Dict[str, Any]] = {}

    @classmethod
    def from_weights(
        cls,
        policy_config: Any,
        env_meta: Any,
        weights: Dict[str, Any],
        name: str,
        rng: Optional[np.random.Generator] = None,
        **kw: Any,
    ) -> PolicyOpponent:
        """A snapshot of ``policy_config``'s policy for a multi-agent ``env_meta`` with ``weights`` loaded
        (``rng``: the generator its sampled moves draw from; None: a fresh unseeded one)."""
        policy = build_eval_policy(policy_config, env_meta, rng)
        policy.load_state_dict(weights)
        return cls(policy, name, **kw)

    @classmethod
    def from_checkpoint(
        cls, folder: Any, env_meta: Any, rng: Optional[np.random.Generator] = None, **kw: Any
    ) -> PolicyOpponent:
        """The policy of an ordinary checkpoint folder (``config.yaml`` and ``policy.pt``), for ``env_meta``
        (``rng``: the generator its sampled moves draw from; None: a fresh unseeded one).

        Raises:
            FileNotFoundError, ValueError: not a complete checkpoint folder (`check_checkpoint_folder`).
        """
        import yaml

        from rlightning.policy.checkpoint import read_checkpoint
        from rlightning.policy.standalone import check_checkpoint_folder
        from rlightning.utils.config import config_from_dict

        path = check_checkpoint_folder(folder)
        config = config_from_dict(yaml.safe_load((path / "config.yaml").read_text()), source=f"in {path}")
        policy = build_eval_policy(config.policy, env_meta, rng)
        policy.load_checkpoint_state(read_checkpoint(path / "policy.pt"))
        return cls(policy, Path(folder).name, **kw)

    def act(self, obs: Dict[str, np.ndarray], seat: Optional[str] = None) -> np.ndarray:
        """``[k]`` actions of the snapshot for ``seat`` (None: the first) under the observations' ``action_mask``."""
        group = self.group_of[seat] if seat is not None else next(iter(self.policy.policies))
        act = self.policy.policies[group].compute_actions
        if group not in self._kwargs:  # no critic pass where the policy can leave it out
            self._kwargs[group] = {"with_value": False} if "with_value" in inspect.signature(act).parameters else {}
        out = act(obs, deterministic=self.deterministic, **self._kwargs[group])
        return np.asarray(out["action"]).reshape(-1)

    def batch_key(self, seat: str) -> Any:
        """The policy group playing ``seat`` (seats of one group are answered in one call)."""
        return self.group_of.get(seat, seat)

    def reseed(self, rng: np.random.Generator) -> None:
        """Draw the sampled moves from ``rng`` from now on (a seeded env's games repeat)."""
        self.policy.np_rng = rng
        for inner in self.policy.policies.values():
            inner.np_rng = rng


def build_eval_policy(policy_config: Any, env_meta: Any, rng: Optional[np.random.Generator] = None) -> Any:
    """An eval-role policy of ``policy_config`` for ``env_meta`` (a `MultiAgentPolicy` for Dict-of-agent spaces),
    its sampled actions drawn from ``rng`` (None: a fresh unseeded generator)."""
    from rlightning.policy.base_policy import PolicyRole
    from rlightning.policy.multi_agent import MultiAgentPolicy

    cfg = policy_config.model_copy(deep=True)
    cfg.checkpoint = None
    policy = MultiAgentPolicy(cfg, role_type=PolicyRole.EVAL)
    policy.np_rng = rng if rng is not None else np.random.default_rng()
    policy.construct_network(env_meta)
    for module in policy.modules.values():
        module.eval()
    return policy
