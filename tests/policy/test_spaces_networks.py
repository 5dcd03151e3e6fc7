"""Encoders and action heads for every space, and every built-in algorithm with every encoder that fits it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensordict import TensorDict

from rlightning.policy.algorithms import A2CPolicy, DQNPolicy, PPOPolicy, SACPolicy, TD3Policy
from rlightning.policy.algorithms.networks import ObsEncoder
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.networks import (
    ActionHead,
    DictEncoder,
    ImpalaCNN,
    MinAtarCNN,
    MultiCategorical,
    batch_len,
    build_encoder,
    obs_to_tensor,
)
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig

IMAGE = spaces.Box(0, 255, (10, 10, 3), np.uint8)
OBS_SPACES = {
    "vector": spaces.Box(-1.0, 1.0, (5,), np.float32),
    "image": IMAGE,
    "dict": spaces.Dict(
        {
            "pixels": spaces.Box(0, 255, (3, 12, 12), np.uint8),  # channels first
            "pos": spaces.Box(-1.0, 1.0, (2,), np.float32),
            "mode": spaces.Discrete(3),
            "flags": spaces.MultiDiscrete([2, 3]),
        }
    ),
    "tuple": spaces.Tuple((spaces.Box(-1.0, 1.0, (2,), np.float32), spaces.MultiBinary(4))),
}
ACTION_SPACES = {
    "discrete": spaces.Discrete(3, start=1),
    "multi_discrete": spaces.MultiDiscrete([3, 2], start=[0, 5]),
    "multi_binary": spaces.MultiBinary(3),
    "continuous": spaces.Box(-2.0, 2.0, (2,), np.float32),
}
# Every algorithm with every encoder that makes sense for it; action heads do not depend on the encoder, so
# PPO meets each head once (on vectors) and each encoder once (with Discrete actions).
CASES = (
    [("ppo", obs, "discrete") for obs in OBS_SPACES]
    + [("ppo", "vector", act) for act in ("multi_discrete", "multi_binary", "continuous")]
    + [("ppo", "image", "continuous"), ("a2c", "dict", "multi_binary"), ("a2c", "image", "discrete")]
    + [("dqn", obs, "discrete") for obs in OBS_SPACES]
    + [(algo, obs, "continuous") for algo in ("sac", "td3") for obs in OBS_SPACES]
)
CLASSES = {"ppo": PPOPolicy, "a2c": A2CPolicy, "dqn": DQNPolicy, "sac": SACPolicy, "td3": TD3Policy}


def _batch(space, n, seed=0):
    """``n`` samples of ``space`` stacked as an env worker hands them over (dicts and tuples of arrays)."""
    space.seed(seed)
    xs = [space.sample() for _ in range(n)]
    if isinstance(space, spaces.Dict):
        return {k: np.stack([x[k] for x in xs]) for k in space.spaces}
    if isinstance(space, spaces.Tuple):
        return tuple(np.stack([x[i] for x in xs]) for i in range(len(space.spaces)))
    return np.stack(xs)


def _stored(obs):
    """What a storage hands the learner: a TensorDict for dict observations (Tuple ones keyed "0", "1", ...)."""
    if isinstance(obs, dict):
        return TensorDict({k: torch.as_tensor(v) for k, v in obs.items()}, batch_size=[batch_len(obs)])
    if isinstance(obs, tuple):
        return TensorDict({str(i): torch.as_tensor(v) for i, v in enumerate(obs)}, batch_size=[batch_len(obs)])
    return torch.as_tensor(obs)


def _make(algo, obs_space, act_space, n=16, **cfg):
    extra = {"num_minibatches": 2} if algo == "ppo" else {}
    config = PolicyConfig(type=algo, hidden_sizes=[16], **{"cnn": "minatar", **extra, **cfg})
    policy = CLASSES[algo](config, PolicyRole.TRAIN)
    policy.setup(EnvMeta("e-0", act_space, obs_space, n), seed=0)
    return policy


def _dataset(algo, obs_space, out, n=16):
    obs = _stored(_batch(obs_space, n, seed=1))
    action = torch.as_tensor(out["action"])
    if algo in ("ppo", "a2c"):
        data = {
            "obs": obs,
            "action": action,
            "log_prob": torch.as_tensor(out["log_prob"]),
            "value": torch.zeros(n),
            "advantage": torch.linspace(-1, 1, n),
            "return": torch.linspace(-1, 1, n),
        }
        if "raw_action" in out:
            data["raw_action"] = torch.as_tensor(out["raw_action"])
    else:
        data = {
            "obs": obs,
            "action": action,
            "reward": torch.linspace(-1, 1, n),
            "next_obs": _stored(_batch(obs_space, n, seed=2)),
            "terminated": torch.zeros(n, dtype=torch.bool),
        }
    return TensorDict(data, batch_size=[n])


@pytest.mark.parametrize("algo, obs, act", CASES)
def test_every_algorithm_acts_trains_and_round_trips_with_every_encoder_that_fits(algo, obs, act):
    torch.manual_seed(0)
    obs_space, act_space = OBS_SPACES[obs], ACTION_SPACES[act]
    policy = _make(algo, obs_space, act_space, norm_obs=obs in ("vector", "dict"))
    batch = _batch(obs_space, 16)
    out = policy.compute_actions(batch)
    assert out["action"].shape == (16, *act_space.shape) and out["action"].dtype == act_space.dtype
    assert all(act_space.contains(a) for a in out["action"]), out["action"][:3]
    if algo in ("ppo", "a2c"):
        assert out["log_prob"].shape == (16,) and out["value"].shape == (16,)
    greedy = policy.compute_actions(batch, deterministic=True)["action"]
    np.testing.assert_array_equal(greedy, policy.compute_actions(batch, deterministic=True)["action"])

    before = {k: v.clone() for k, v in policy.encoder.state_dict().items()}
    policy.update_dataset(_dataset(algo, obs_space, out))
    for _ in range(2):  # TD3 and SAC move the actor every second update
        metrics = policy.train()
    assert all(np.isfinite(v) for v in metrics.values() if isinstance(v, float)), metrics
    trainable = [p for p in policy.encoder.parameters() if p.requires_grad]
    if trainable:  # a CNN learns with the policy (SAC and TD3: from the critic loss)
        assert any(not torch.equal(before[k], v) for k, v in policy.encoder.state_dict().items())

    # weights round trip: a fresh acting copy with the learner's weights acts the same
    copy = CLASSES[algo](policy.config, PolicyRole.EVAL)
    copy.setup(EnvMeta("e-0", act_space, obs_space, 16), seed=5)
    copy.load_state_dict(policy.get_weights())
    np.testing.assert_array_equal(
        copy.compute_actions(batch, deterministic=True)["action"],
        policy.compute_actions(batch, deterministic=True)["action"],
    )


def test_a_checkpoint_restores_a_dict_observation_ppo(tmp_path):
    space, act = OBS_SPACES["dict"], ACTION_SPACES["multi_discrete"]
    policy = _make("ppo", space, act, norm_obs=True)
    out = policy.compute_actions(_batch(space, 16))
    policy.update_dataset(_dataset("ppo", space, out))
    policy.train()
    path = policy.save_checkpoint(tmp_path / "ckpt")
    restored = _make("ppo", space, act, norm_obs=True)
    restored.load_checkpoint(path)
    for k, v in policy.get_weights().items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(restored.get_weights()[k]), err_msg=k)
    batch = _batch(space, 8, seed=3)
    np.testing.assert_array_equal(
        restored.compute_actions(batch, deterministic=True)["action"],
        policy.compute_actions(batch, deterministic=True)["action"],
    )


# --------------------------------------------------------------------------- encoders


def test_dict_encoder_concatenates_one_encoder_per_key_in_key_order():
    space = OBS_SPACES["dict"]
    enc = build_encoder(space, cnn="impala", normalize=True)
    assert isinstance(enc, DictEncoder)
    parts = dict(zip(enc.keys, enc.encoders.values()))
    assert isinstance(parts["pixels"], ImpalaCNN) and parts["pixels"].channels == 3  # channels first read
    assert isinstance(parts["pos"], ObsEncoder) and parts["pos"].normalize  # vectors normalised, pixels scaled
    assert parts["mode"].dim == 3 and parts["flags"].dim == 5  # one-hot, one-hot per entry
    assert enc.dim == sum(e.dim for e in enc.encoders.values()) and enc.normalize
    obs = _batch(space, 4)
    feats = enc(obs_to_tensor(obs))
    assert feats.shape == (4, enc.dim) and feats.dtype == torch.float32
    torch.testing.assert_close(feats, enc(_stored(obs)))  # a dict of arrays (acting) = a TensorDict (training)
    torch.testing.assert_close(feats[:, : parts["flags"].dim], parts["flags"](torch.as_tensor(obs["flags"])))


def test_dict_encoder_normalises_its_vector_entries_with_running_statistics():
    enc = build_encoder(OBS_SPACES["dict"], cnn="impala", normalize=True)
    obs = _stored(_batch(OBS_SPACES["dict"], 64))
    obs["pos"] = obs["pos"] * 0.1 + 3.0
    enc.update(enc.batch_sums(obs))
    pos = dict(zip(enc.keys, enc.encoders.values()))["pos"]
    torch.testing.assert_close(pos.rms.mean.float(), obs["pos"].mean(0), atol=1e-3, rtol=1e-3)


def test_multi_discrete_and_multi_binary_observations_are_encoded_flat():
    md = ObsEncoder(spaces.MultiDiscrete([2, 3], start=[1, -1]))
    out = md(torch.tensor([[1, -1], [2, 1]]))
    torch.testing.assert_close(out, torch.tensor([[1.0, 0, 1, 0, 0], [0, 1, 0, 0, 1]]))
    mb = ObsEncoder(spaces.MultiBinary((2, 2)))
    assert mb(torch.ones(3, 2, 2, dtype=torch.int8)).shape == (3, 4)


def test_tuple_observations_take_a_tuple_or_a_mapping_keyed_by_position():
    space = OBS_SPACES["tuple"]
    enc = build_encoder(space)
    obs = _batch(space, 5)
    torch.testing.assert_close(enc(obs_to_tensor(obs)), enc(_stored(obs)))
    with pytest.raises(ValueError, match="expects a Tuple observation of 2 entries, got 1"):
        enc((torch.zeros(5, 2),))


def test_dict_encoder_names_a_missing_key_and_a_wrong_type():
    enc = build_encoder(spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Discrete(2)}))
    with pytest.raises(KeyError, match=r"observation keys \['b'\] missing; got \['a'\]"):
        enc({"a": torch.zeros(3, 2)})
    with pytest.raises(TypeError, match=r"takes a mapping \(dict, TensorDict\) of observations, got Tensor"):
        enc(torch.zeros(3, 2))


@pytest.mark.parametrize(
    "space, match",
    [
        (
            spaces.Text(5),
            r"encodes Box, Discrete, MultiDiscrete, MultiBinary, Dict or Tuple observation spaces, got Text",
        ),
        (
            spaces.Dict({"ok": spaces.Discrete(2), "bad": spaces.Sequence(spaces.Discrete(2))}),
            r"observation entry 'bad' of Dict space: .* got Sequence",
        ),
        (spaces.Dict({}), r"has no entries"),
    ],
)
def test_spaces_no_encoder_takes_are_named_with_what_is_supported(space, match):
    with pytest.raises(ValueError, match=match):
        build_encoder(space)


def test_minatar_cnn_is_the_papers_network_on_bool_planes():
    net = MinAtarCNN((10, 10, 4))
    assert net.dim == 16 * 8 * 8
    planes = torch.zeros(2, 10, 10, 4, dtype=torch.bool)
    planes[0, 3, 4, 1] = True
    out = net(planes)
    assert out.shape == (2, net.dim) and out.dtype == torch.float32
    torch.testing.assert_close(out, net(planes.float()))  # bool planes are 0/1, not divided by 255


# --------------------------------------------------------------------------- action heads


def test_multi_categorical_sums_log_probs_and_entropies_over_entries():
    logits = torch.randn(4, 5)
    dist = MultiCategorical(logits, [2, 3])
    action = torch.tensor([[0, 2], [1, 0], [1, 1], [0, 0]])
    a, b = torch.distributions.Categorical(logits=logits[:, :2]), torch.distributions.Categorical(logits=logits[:, 2:])
    torch.testing.assert_close(dist.log_prob(action), a.log_prob(action[:, 0]) + b.log_prob(action[:, 1]))
    torch.testing.assert_close(dist.entropy(), a.entropy() + b.entropy())
    torch.testing.assert_close(dist.mode(), torch.stack([logits[:, :2].argmax(-1), logits[:, 2:].argmax(-1)], -1))


@pytest.mark.parametrize("kind", list(ACTION_SPACES))
def test_action_heads_map_samples_to_the_env_and_records_back(kind):
    space = ACTION_SPACES[kind]
    head = ActionHead(space, "ppo", tuple(ACTION_SPACES))
    actor = head.build_actor(7, [8], "tanh")
    dist = head.distribution(actor(torch.randn(6, 7)))
    sample = dist.sample()
    env_action = head.to_env(sample)
    assert env_action.shape == (6, *space.shape) and all(space.contains(a) for a in env_action)
    back = head.from_record(torch.as_tensor(env_action), 6)
    logp, ent = head.log_prob_entropy(dist, back)
    assert logp.shape == (6,) and ent.shape == (6,)
    if kind != "continuous":  # the record's action is the sample again (a Box one is clipped: PPO keeps raw_action)
        torch.testing.assert_close(logp, head.log_prob_entropy(dist, sample)[0])


@pytest.mark.parametrize(
    "algo, space, match",
    [
        (
            "ppo",
            spaces.Box(-1, 1, (2, 2)),
            r"policy 'ppo' supports Discrete, MultiDiscrete, MultiBinary, 1-D Box action spaces, got Box",
        ),
        ("ppo", spaces.Tuple((spaces.Discrete(2),)), r"got Tuple\(Discrete\(2\)"),
        (
            "dqn",
            spaces.MultiDiscrete([2, 2]),
            r"policy 'dqn' needs a discrete \(Discrete\) action space, got multi_discrete MultiDiscrete",
        ),
        (
            "sac",
            spaces.Discrete(3),
            r"policy 'sac' needs a continuous \(Box\) action space, got discrete Discrete\(3\)",
        ),
        ("td3", spaces.MultiBinary(2), r"policy 'td3' needs a continuous \(Box\) action space, got multi_binary"),
    ],
)
def test_unsupported_action_spaces_name_the_space_and_what_is_supported(algo, space, match):
    with pytest.raises(ValueError, match=match):
        _make(algo, OBS_SPACES["vector"], space)


def test_validate_config_rejects_a_policy_for_another_action_kind_before_any_worker():
    from rlightning.utils.config import ConfigError, config_from_dict
    from rlightning.utils.validate import action_kind, validate_config

    assert action_kind(spaces.MultiDiscrete([2])) == "multi_discrete"
    assert action_kind(spaces.MultiBinary(2)) == "multi_binary"
    train = {"batch_size": 64, "rollout_steps": 128}
    gym.register(id="H4MultiBinary-v0", entry_point="tests.policy.test_spaces_networks:_MultiBinaryEnv")
    try:
        cfg = config_from_dict({"env": {"name": "H4MultiBinary-v0"}, "policy": {"type": "dqn"}, "train": train})
        with pytest.raises(ConfigError, match="policy 'dqn' supports discrete actions, but env .* multi_binary"):
            validate_config(cfg)
        ok = {"env": {"name": "H4MultiBinary-v0"}, "policy": {"type": "ppo"}, "train": train}
        validate_config(config_from_dict(ok))  # PPO has a MultiBinary head
    finally:
        gym.registry.pop("H4MultiBinary-v0")


class _MultiBinaryEnv(gym.Env):
    observation_space = spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = spaces.MultiBinary(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(3, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), float(action.sum()), False, False, {}
