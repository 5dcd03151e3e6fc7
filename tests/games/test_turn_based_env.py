"""The turn-based backend: the learner's seat per game, alternating seats, rewards on the learner's last step,
legal moves only, OpenSpiel through shimmy, and the errors of bad input."""

import numpy as np
import pytest

from rlightning.env import OpenSpielEnv, TurnBasedEnv
from rlightning.env.pettingzoo_env import make_parallel_env
from rlightning.selfplay.matches import play_match
from rlightning.selfplay.opponents import RandomOpponent, ScriptedOpponent
from rlightning.types import MultiAgentPolicyResponse
from rlightning.utils.config import EnvConfig

TTT = "pettingzoo.classic:tictactoe_v3"


def _random_actions(ret, agents, rng):
    out = {}
    for a in agents:
        mask = ret.observation[a]["action_mask"].astype(bool)
        mask[~mask.any(1)] = True
        out[a] = np.where(mask, rng.random(mask.shape), -1.0).argmax(1)
    return out


def _play(env, steps, seed=0):
    rng = np.random.default_rng(seed)
    ret = env.reset(seed=seed)
    rets = [ret]
    for _ in range(steps):
        ret = env.step(MultiAgentPolicyResponse(env.env_id, action=_random_actions(ret, env.agent_ids, rng)))
        rets.append(ret)
    return rets


def test_one_active_seat_per_game_and_seats_alternate():
    env = TurnBasedEnv(EnvConfig(name=TTT, backend="pettingzoo_aec", num_envs=4))
    rets = _play(env, 40)
    seats = np.stack([r.info["learner_seat"] for r in rets])
    assert seats[0].tolist() == [0, 1, 0, 1]  # sub-env j starts in seat j % 2
    for ret in rets:
        active = np.stack([ret.info["active"][a] for a in env.agent_ids])
        assert (active.sum(0) <= 1).all()  # at most the learner's seat acts
        for k in range(len(env.agent_ids)):
            other = ret.observation[env.agent_ids[1 - k]]
            rows = ret.info["learner_seat"] == k
            assert not other["action_mask"][rows].any()  # the opponent's seat shows nothing
    # each sub-env changed seat after each of its games
    games = np.stack([r.info["episode_length"] for r in rets])
    for j in range(4):
        changes = np.flatnonzero(np.diff(seats[:, j]))
        ends = np.flatnonzero((games[1:, j] == 0) & (games[:-1, j] > 0))
        assert len(changes) == len(ends) > 2
    env.close()


def test_game_end_rewards_go_to_the_learners_last_step():
    env = TurnBasedEnv(EnvConfig(name=TTT, backend="pettingzoo_aec", num_envs=8, env_kwargs={"opponent": "scripted"}))
    rets = _play(env, 24)
    finals = 0
    for prev, ret in zip(rets, rets[1:]):
        for k, a in enumerate(env.agent_ids):
            learner = prev.info["learner_seat"] == k
            done = ret.last_terminated[a] & learner
            # rewards only on the learner's game-ending step: the scripted side's winning reply is in it
            assert (ret.last_reward[a][~done] == 0).all()
            assert set(np.unique(ret.last_reward[a][done])) <= {-1.0, 0.0, 1.0}
            finals += int(done.sum())
            assert (ret.last_reward[a][done] == ret.info["episode_return"][done]).all()
    assert finals > 20
    # against win-or-block play, random moves mostly lose
    assert (
        np.mean(
            [
                r.info["episode_return"][r.last_terminated["player_1"] | r.last_terminated["player_2"]].mean()
                for r in rets[1:]
                if (r.last_terminated["player_1"] | r.last_terminated["player_2"]).any()
            ]
        )
        < 0
    )
    env.close()


def test_illegal_moves_are_refused_with_the_legal_ones_named():
    env = TurnBasedEnv(
        EnvConfig(name=TTT, backend="pettingzoo_aec", num_envs=1, env_kwargs={"learner_seat": "player_1"})
    )
    env.reset(seed=0)
    env.step(MultiAgentPolicyResponse(env.env_id, action={"player_1": np.array([4]), "player_2": np.array([0])}))
    taken = [a for a in range(9) if not env._observe(0, "player_1")["action_mask"][a]]
    assert 4 in taken and len(taken) == 2
    with pytest.raises(ValueError, match=r"played illegal move 4 in game 0; legal moves: \["):
        env.step(MultiAgentPolicyResponse(env.env_id, action={"player_1": np.array([4]), "player_2": np.array([0])}))
    env.close()


def test_scripted_opponent_wins_and_blocks():
    opp = ScriptedOpponent(TTT)
    board = np.zeros((3, 3, 2), dtype=np.int8)
    board[0, 0, 0] = board[0, 1, 0] = 1  # the mover has two in the top row: cell [0, 2] (action 2) wins
    board[1, 0, 1] = board[1, 1, 1] = 1  # the other side threatens [1, 2] (action 5)
    mask = (board.sum(-1) == 0).reshape(-1).astype(np.int8)
    assert opp.act({"observation": board[None], "action_mask": mask[None]}).tolist() == [2]
    board[0, 1, 0] = 0
    mask = (board.sum(-1) == 0).reshape(-1).astype(np.int8)
    assert opp.act({"observation": board[None], "action_mask": mask[None]}).tolist() == [5]
    with pytest.raises(ValueError, match=r"opponent 'scripted' plays \['connect_four', 'tictactoe'\]"):
        ScriptedOpponent("pettingzoo.classic:chess_v6")


def test_a_match_asks_the_player_only_where_its_seat_is_to_move():
    """play_match side by side: a game that ended restarts on the next step (its row has no legal move), and the
    player is not asked there (win-or-block play, which has no move on an empty mask, raised); results are counted
    from the player's side in each seat."""
    env = EnvConfig(name=TTT, backend="pettingzoo_aec")

    class Checked(RandomOpponent):
        asked = 0

        def act(self, obs, seat=None):
            assert np.asarray(obs["action_mask"]).any(1).all(), "asked to move in a finished game"
            Checked.asked += len(obs["action_mask"])
            return super().act(obs, seat)

    player = Checked(np.random.default_rng(0))
    first = play_match(env, player, RandomOpponent(), 64, "player_1", seed=10)  # the env's seed draws its moves
    second = play_match(env, player, RandomOpponent(), 64, "player_2", seed=20)
    assert first.games == second.games == 64 and Checked.asked >= 64 * 3 + 64 * 2  # >= 3 and 2 moves a game
    # random against random: the first mover wins 58.5% and loses 28.8% (exact), the second the reverse
    assert first["win"] > first["loss"] and second["loss"] > second["win"]
    scripted = play_match(env, ScriptedOpponent(TTT, np.random.default_rng(3)), RandomOpponent(), 16, "player_2")
    assert scripted.games == 16


def test_random_opponent_plays_only_legal_moves():
    rng = np.random.default_rng(0)
    mask = rng.random((500, 7)) < 0.3
    mask[:, 3] = True
    acts = RandomOpponent(rng).act({"action_mask": mask})
    assert mask[np.arange(500), acts].all()


def test_openspiel_connect_four_through_shimmy():
    cfg = EnvConfig(name="connect_four", backend="openspiel", num_envs=2)
    OpenSpielEnv.prepare(cfg)
    env = OpenSpielEnv(cfg)
    meta = env.get_metadata()
    assert list(meta.action_space.spaces) == ["player_0", "player_1"]
    assert meta.observation_space["player_0"]["action_mask"].shape == (7,)
    rets = _play(env, 40)
    done = sum(int(r.last_terminated["player_0"].sum() + r.last_terminated["player_1"].sum()) for r in rets)
    assert done >= 2 * 2  # every row is done at least once per game: both seats' flags
    env.close()


def test_backend_mismatches_name_the_right_backend():
    with pytest.raises(ValueError, match="turn-based .AEC. PettingZoo env without parallel_env.*pettingzoo_aec"):
        make_parallel_env("pettingzoo.classic:connect_four_v3")
    with pytest.raises(ValueError, match="not a turn-based PettingZoo AECEnv; use env.backend: pettingzoo"):
        TurnBasedEnv.prepare(EnvConfig(name="tests.games.aec_envs:early_exit", backend="pettingzoo_aec"))


def test_a_game_without_masks_is_refused():
    with pytest.raises(ValueError, match="gives no action mask .* needs one"):
        TurnBasedEnv.prepare(EnvConfig(name="tests.games.aec_envs:no_mask", backend="pettingzoo_aec"))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"opponent": "league", "league_dir": "x", "league": {"pool_size": 0}}, "pool_size is 0; the learner needs"),
        ({"opponent": "league"}, "needs env_kwargs.league_dir"),
        ({"opponent": "league", "league_dir": "x", "league": {"pool_sise": 3}}, "did you mean 'pool_size'"),
        ({"opponent": "nobody"}, "does not exist"),
        ({"opponent": 3}, "must be 'random', 'scripted', 'league' or a checkpoint folder"),
    ],
)
def test_bad_opponents_and_league_settings(kwargs, match):
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        TurnBasedEnv.prepare(EnvConfig(name=TTT, backend="pettingzoo_aec", env_kwargs=kwargs))


def test_a_bad_learner_seat_names_the_seats():
    with pytest.raises(ValueError, match=r"learner_seat must be 'alternate' or one of \['player_1', 'player_2'\]"):
        TurnBasedEnv(EnvConfig(name=TTT, backend="pettingzoo_aec", env_kwargs={"learner_seat": "white"}))
