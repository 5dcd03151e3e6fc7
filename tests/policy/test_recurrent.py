"""Recurrent cores (LSTM, GRU), their acting state per env worker, and recurrent PPO's sequence training."""

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlightning.policy import PolicyRole
from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.networks.recurrent import RECURRENT_CORES, RecurrentStreams, build_recurrent_core
from rlightning.types import EnvMeta, EnvRet
from rlightning.utils.config import ConfigError, PolicyConfig, config_from_dict

OBS = spaces.Box(-1.0, 1.0, (3,), np.float32)
META = EnvMeta(env_id="toy-0", action_space=spaces.Discrete(2), observation_space=OBS, num_envs=4)


def _policy(kind="lstm", role=PolicyRole.TRAIN, seed=0, **kw):  # one core each for actor and critic (the default)
    torch.manual_seed(seed)
    cfg = PolicyConfig(type="ppo", recurrent=kind, recurrent_size=8, hidden_sizes=[8], num_minibatches=2, **kw)
    policy = PPOPolicy(cfg, role_type=role)
    policy.setup(META)
    return policy


def _ret(obs, lengths, env_id="toy-0", done=None, ts=None):
    n = obs.shape[0]
    done = np.zeros(n, bool) if done is None else np.asarray(done)
    kw = {} if ts is None else {"ts_env_sent_ns": ts}
    info = {"episode_length": np.asarray(lengths), "episode_return": np.zeros(n)}
    return EnvRet(env_id, obs.astype(np.float32), np.zeros(n, np.float32), done, np.zeros(n, bool), info, **kw)


# ---------------------------------------------------------------------------- cores


@pytest.mark.parametrize("kind", RECURRENT_CORES)
def test_core_shapes_dtypes_and_state_keys(kind):
    core = build_recurrent_core(kind, in_dim=5, hidden_size=7)
    assert core.state_keys == (("recurrent_h", "recurrent_c") if kind == "lstm" else ("recurrent_h",))
    state = core.initial_state(4)
    assert {k: tuple(v.shape) for k, v in state.items()} == {k: (4, 7) for k in core.state_keys}
    y, new = core.step(torch.randn(4, 5), state)
    assert y.shape == (4, 7) and y.dtype == torch.float32
    assert all(v.shape == (4, 7) and v.dtype == torch.float32 for v in new.values())
    out = core.unroll(torch.randn(4, 6, 5), state, torch.zeros(4, 6, dtype=torch.bool))
    assert out.shape == (4, 6, 7) and out.dtype == torch.float32


@pytest.mark.parametrize("kind", RECURRENT_CORES)
def test_unroll_with_resets_is_the_steps_acting_takes(kind):
    torch.manual_seed(0)
    core = build_recurrent_core(kind, in_dim=3, hidden_size=6)
    x = torch.randn(2, 9, 3)
    is_init = torch.zeros(2, 9, dtype=torch.bool)
    is_init[0, 4] = True  # an episode starts mid-sequence on row 0
    is_init[1, 0] = True
    state0 = {k: torch.randn(2, 6) for k in core.state_keys}
    state, steps = state0, []
    for t in range(9):
        y, state = core.step(x[:, t], state, is_init[:, t])
        steps.append(y)
    torch.testing.assert_close(core.unroll(x, state0, is_init), torch.stack(steps, 1))
    # Without resets after the first step the whole sequence runs in one torch call, with the same result.
    flat = torch.zeros_like(is_init)
    state, steps = state0, []
    for t in range(9):
        y, state = core.step(x[:, t], state, flat[:, t])
        steps.append(y)
    torch.testing.assert_close(core.unroll(x, state0, flat), torch.stack(steps, 1))


def test_is_init_resets_the_state_of_those_rows_only():
    torch.manual_seed(0)
    core = build_recurrent_core("lstm", in_dim=3, hidden_size=4)
    x = torch.randn(2, 3)
    warm = {k: torch.randn(2, 4) for k in core.state_keys}
    y_reset, _ = core.step(x, warm, torch.tensor([True, False]))
    y_zero, _ = core.step(x, core.initial_state(2))
    y_warm, _ = core.step(x, warm)
    torch.testing.assert_close(y_reset[0], y_zero[0])
    torch.testing.assert_close(y_reset[1], y_warm[1])
    assert not torch.allclose(y_warm[0], y_zero[0])


def test_bad_core_config_is_named():
    with pytest.raises(ValueError, match=r"unknown recurrent core 'rnn'; valid: 'lstm', 'gru'"):
        build_recurrent_core("rnn", 3, 4)
    with pytest.raises(ValueError, match="hidden_size must be an int >= 1"):
        build_recurrent_core("gru", 3, 0)
    core = build_recurrent_core("lstm", 3, 4)
    with pytest.raises(KeyError, match="missing \\['recurrent_c'\\]"):
        core.step(torch.zeros(2, 3), {"recurrent_h": torch.zeros(2, 4)})
    with pytest.raises(ValueError, match="expected \\(2, 4\\)"):
        core.step(torch.zeros(2, 3), {"recurrent_h": torch.zeros(2, 5), "recurrent_c": torch.zeros(2, 4)})
    with pytest.raises(ConfigError, match="policy.recurrent.*'lstm' or 'gru'"):
        config_from_dict({"policy": {"type": "ppo", "recurrent": "transformer"}})


# ---------------------------------------------------------------------------- acting state


def test_state_is_carried_per_env_and_reset_at_episode_starts():
    policy = _policy()
    assert policy.stateful_acting and "core" in policy.modules
    rng = np.random.default_rng(0)
    first = policy.rollout_batch([_ret(rng.normal(size=(4, 3)), [0, 0, 0, 0], ts=1)])[0]
    assert first.is_init.tolist() == [True] * 4 and not first.recurrent_h.any()
    after = {k: v.clone() for k, v in policy.streams._streams[("toy-0", False)].after.items()}
    second = policy.rollout_batch([_ret(rng.normal(size=(4, 3)), [1, 1, 0, 1], ts=2)])[0]
    assert second.is_init.tolist() == [False, False, True, False]
    np.testing.assert_allclose(second.recurrent_h[[0, 1, 3]], after["recurrent_h"][[0, 1, 3]].numpy())
    np.testing.assert_allclose(second.recurrent_c[[0, 1, 3]], after["recurrent_c"][[0, 1, 3]].numpy())
    assert not second.recurrent_h[2].any() and not second.recurrent_c[2].any()  # a new episode on row 2
    assert second.recurrent_h.dtype == np.float32 and second.is_init.dtype == bool
    # The same EnvRet asked again (the bootstrap value, then the next rollout's first action): same state.
    again = policy.rollout_batch([_ret(rng.normal(size=(4, 3)), [1, 1, 0, 1], ts=2)])[0]
    np.testing.assert_array_equal(again.recurrent_h, second.recurrent_h)


def test_env_workers_and_deterministic_evaluation_keep_their_own_states():
    policy = _policy(role=PolicyRole.EVAL)
    obs = np.ones((4, 3), np.float32)
    policy.rollout_batch([_ret(obs, [0] * 4, "a", ts=1), _ret(obs[:2], [0] * 2, "b", ts=1)])
    h_a = policy.streams._streams[("a", False)].after["recurrent_h"].clone()
    policy.set_deterministic(True)
    evaluation = policy.rollout_batch([_ret(obs, [0] * 4, "a", ts=5)])[0]
    assert evaluation.is_init.all()  # the evaluation's own episodes, not the rollout's state
    policy.set_deterministic(False)
    resp_a, resp_b = policy.rollout_batch([_ret(obs, [1] * 4, "a", ts=2), _ret(obs[:2], [1] * 2, "b", ts=2)])
    np.testing.assert_allclose(resp_a.recurrent_h, h_a.numpy())
    assert resp_b.recurrent_h.shape == (2, 16) and not resp_b.is_init.any()  # actor's and critic's states


def test_episode_starts_without_episode_length_follow_the_done_flags():
    core = build_recurrent_core("gru", 3, 4)
    streams = RecurrentStreams(core)

    def ret(done, ts):
        zeros = np.zeros(2, bool)
        return EnvRet("e", np.zeros((2, 3), np.float32), np.zeros(2), np.asarray(done), zeros, {}, ts_env_sent_ns=ts)

    ret0 = ret([False, False], 1)
    _, init = streams.begin([ret0], False, "cpu")
    assert init.tolist() == [True, True]
    streams.commit({"recurrent_h": torch.ones(2, 4)})
    done = EnvRet(
        "e", np.zeros((2, 3), np.float32), np.zeros(2), np.array([True, False]), np.zeros(2, bool), {}, ts_env_sent_ns=2
    )
    state, init = streams.begin([done], False, "cpu")
    assert init.tolist() == [False, False] and state["recurrent_h"].eq(1).all()
    streams.commit({"recurrent_h": torch.full((2, 4), 2.0)})
    nxt = EnvRet(
        "e", np.zeros((2, 3), np.float32), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool), {}, ts_env_sent_ns=3
    )
    state, init = streams.begin([nxt], False, "cpu")
    assert init.tolist() == [True, False]  # row 0 was done: its reset observation starts an episode
    assert state["recurrent_h"][0].eq(0).all() and state["recurrent_h"][1].eq(2).all()


def test_direct_compute_actions_starts_from_a_zero_state():
    policy = _policy("gru")
    out = policy.compute_actions(np.zeros((3, 3), np.float32))
    assert out["is_init"].all() and not out["recurrent_h"].any() and "recurrent_c" not in out
    assert len(policy.streams) == 0


def test_checkpoint_round_trip_restores_the_core(tmp_path):
    policy = _policy(seed=1)
    path = policy.save_checkpoint(tmp_path / "lstm.pt")
    fresh = _policy(seed=2)
    obs = np.random.default_rng(0).normal(size=(4, 3)).astype(np.float32)
    before = fresh.compute_actions(obs, deterministic=True)["value"]
    fresh.load_checkpoint(path)
    for name in ("core", "actor", "critic"):
        for (k, a), (_, b) in zip(policy.modules[name].state_dict().items(), fresh.modules[name].state_dict().items()):
            torch.testing.assert_close(a, b, msg=f"{name}.{k}")
    after = fresh.compute_actions(obs, deterministic=True)["value"]
    assert not np.allclose(before, after)
    np.testing.assert_allclose(policy.compute_actions(obs, deterministic=True)["value"], after)


def test_recurrent_update_dataset_needs_sequences():
    from tensordict import TensorDict

    policy = _policy()
    flat = TensorDict({"obs": torch.zeros(8, 3), "action": torch.zeros(8, dtype=torch.long)}, batch_size=[8])
    with pytest.raises(ValueError, match="buffer.unit to 'episode'"):
        policy.update_dataset(flat)
    seq = TensorDict({"obs": torch.zeros(4, 5, 3), "mask": torch.ones(4, 5, dtype=torch.bool)}, batch_size=[4, 5])
    with pytest.raises(KeyError, match="missing keys \\['log_prob'"):
        policy.update_dataset(seq)
