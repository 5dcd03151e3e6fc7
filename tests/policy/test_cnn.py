"""Image encoders: shapes, uint8 scaling, channel order, errors, and selection from the space."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlightning.policy.algorithms.networks import ObsEncoder
from rlightning.policy.networks import ImpalaCNN, NatureCNN, build_encoder, image_layout, is_image_space


def _frames(shape, n=3, seed=0):
    rng = np.random.default_rng(seed)
    return torch.as_tensor(rng.integers(0, 256, size=(n, *shape), dtype=np.uint8))


@pytest.mark.parametrize(
    "shape, expected",
    [
        ((84, 84, 4), (4, 84, 84, True)),
        ((4, 84, 84), (4, 84, 84, False)),
        ((84, 84), (1, 84, 84, False)),
        ((10, 10, 4), (4, 10, 10, True)),
    ],
)
def test_image_layout_reads_the_channel_axis_from_the_short_end(shape, expected):
    assert image_layout(shape) == expected


def test_image_layout_asks_when_the_order_is_ambiguous():
    with pytest.raises(ValueError, match=r"cannot tell the channel axis of image shape \(3, 8, 3\)"):
        image_layout((3, 8, 3))
    assert image_layout((3, 8, 3), channels_last=True) == (3, 3, 8, True)
    with pytest.raises(ValueError, match=r"shape \(H, W\), \(H, W, C\) or \(C, H, W\); got \(4,\)"):
        image_layout((4,))


def test_is_image_space():
    assert is_image_space(spaces.Box(0, 255, (84, 84, 4), np.uint8))
    assert is_image_space(spaces.Box(0, 255, (84, 84), np.uint8))
    assert is_image_space(spaces.Box(0.0, 1.0, (10, 10, 4), np.float32))
    assert not is_image_space(spaces.Box(-1.0, 1.0, (4,), np.float32))
    assert not is_image_space(spaces.Box(-1.0, 1.0, (3, 5), np.float32))
    assert not is_image_space(spaces.Discrete(3))


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaCNN])
def test_uint8_frames_are_scaled_inside_the_network(cls):
    torch.manual_seed(0)
    net = cls((84, 84, 4))
    frames = _frames((84, 84, 4))
    out = net(frames)
    assert out.shape == (3, net.dim) and out.dtype == torch.float32
    torch.testing.assert_close(out, net(frames.float() / 255.0))
    assert not torch.allclose(out, net(frames.float()))  # a float input is taken as it is


@pytest.mark.parametrize("cls", [NatureCNN, ImpalaCNN])
def test_channels_last_and_first_give_the_same_features(cls):
    torch.manual_seed(0)
    hwc = cls((84, 84, 4))
    chw = cls((4, 84, 84))
    chw.load_state_dict(hwc.state_dict())
    frames = _frames((84, 84, 4))
    torch.testing.assert_close(hwc(frames), chw(frames.permute(0, 3, 1, 2)))


def test_leading_batch_dims_are_kept():
    net = ImpalaCNN((10, 10, 4), features=32)
    frames = _frames((10, 10, 4), n=6).reshape(2, 3, 10, 10, 4)
    out = net(frames)
    assert out.shape == (2, 3, 32)
    torch.testing.assert_close(out.reshape(6, 32), net(frames.reshape(6, 10, 10, 4)))


def test_single_channel_frames():
    net = NatureCNN((84, 84), features=64)
    assert net(_frames((84, 84))).shape == (3, 64)


def test_nature_cnn_rejects_small_frames_and_names_the_way_out():
    with pytest.raises(ValueError, match=r"at least 36 x 36 pixels, got 10 x 10; use the IMPALA CNN"):
        NatureCNN((10, 10, 4))


def test_wrong_observation_shape_is_a_clear_error():
    net = ImpalaCNN((10, 10, 4))
    with pytest.raises(ValueError, match=r"expects observations \[B, 10, 10, 4\], got \(2, 10, 10, 3\)"):
        net(torch.zeros(2, 10, 10, 3, dtype=torch.uint8))
    with pytest.raises(TypeError, match="takes a torch.Tensor, got ndarray"):
        net(np.zeros((2, 10, 10, 4), np.uint8))


def test_state_dict_round_trip():
    torch.manual_seed(1)
    a = ImpalaCNN((10, 10, 4))
    torch.manual_seed(2)
    b = ImpalaCNN((10, 10, 4))
    frames = _frames((10, 10, 4))
    assert not torch.allclose(a(frames), b(frames))
    b.load_state_dict(a.state_dict())
    torch.testing.assert_close(a(frames), b(frames))


def test_build_encoder_picks_from_the_space():
    assert isinstance(build_encoder(spaces.Box(0, 255, (84, 84, 4), np.uint8)), NatureCNN)
    assert isinstance(build_encoder(spaces.Box(0, 255, (10, 10, 4), np.uint8), cnn="impala"), ImpalaCNN)
    vec = build_encoder(spaces.Box(-1.0, 1.0, (4,), np.float32), normalize=True)
    assert isinstance(vec, ObsEncoder) and vec.dim == 4
    with pytest.raises(ValueError, match="unknown cnn 'resnet'; valid: 'nature', 'impala', 'minatar'"):
        build_encoder(spaces.Box(0, 255, (84, 84, 4), np.uint8), cnn="resnet")
    with pytest.raises(ValueError, match="observation normalisation is for vector observations"):
        build_encoder(spaces.Box(0, 255, (84, 84, 4), np.uint8), normalize=True)


def test_ppo_acts_and_trains_on_uint8_frames_with_the_cnn():
    from tensordict import TensorDict

    from rlightning.policy.algorithms.ppo import PPOPolicy
    from rlightning.policy.base_policy import PolicyRole
    from rlightning.types import EnvMeta
    from rlightning.utils.config import PolicyConfig

    space = spaces.Box(0, 255, (10, 10, 4), np.uint8)
    meta = EnvMeta("pix-0", spaces.Discrete(3), space, 8)
    policy = PPOPolicy(PolicyConfig(type="ppo", cnn="impala", hidden_sizes=[16], num_minibatches=2), PolicyRole.TRAIN)
    policy.setup(meta, seed=0)
    assert isinstance(policy.encoder, ImpalaCNN)
    frames = _frames((10, 10, 4), n=8).numpy()
    out = policy.compute_actions(frames)
    assert out["action"].shape == (8,) and out["value"].shape == (8,)
    n = 16
    data = TensorDict(
        {
            "obs": _frames((10, 10, 4), n=n, seed=1),
            "action": torch.as_tensor(np.resize(out["action"], n)),
            "log_prob": torch.full((n,), -1.1),
            "value": torch.zeros(n),
            "advantage": torch.linspace(-1, 1, n),
            "return": torch.linspace(-1, 1, n),
        },
        batch_size=[n],
    )
    before = {k: v.clone() for k, v in policy.encoder.state_dict().items()}
    policy.update_dataset(data)
    metrics = policy.train()
    assert np.isfinite(metrics["policy_loss"])
    assert any(not torch.equal(before[k], v) for k, v in policy.encoder.state_dict().items())  # the CNN learns


def test_ppo_rejects_obs_normalisation_for_frames():
    from rlightning.policy.algorithms.ppo import PPOPolicy
    from rlightning.policy.base_policy import PolicyRole
    from rlightning.types import EnvMeta
    from rlightning.utils.config import PolicyConfig

    meta = EnvMeta("pix-0", spaces.Discrete(3), spaces.Box(0, 255, (84, 84, 4), np.uint8), 1)
    policy = PPOPolicy(PolicyConfig(type="ppo", norm_obs=True), PolicyRole.TRAIN)
    with pytest.raises(ValueError, match="observation normalisation is for vector observations"):
        policy.setup(meta, seed=0)


def test_bool_planes_are_not_scaled():
    net = ImpalaCNN((10, 10, 4), features=8)
    planes = torch.rand(2, 10, 10, 4) > 0.5  # MinAtar's observations
    torch.testing.assert_close(net(planes), net(planes.float()))
