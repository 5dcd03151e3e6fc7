"""gSDE for SAC (rlightning/policy/networks/gsde.py, SACConfig.use_sde): distribution, acting rule, training."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal

from rlightning.policy.acting_copy import EvalCopyFactory
from rlightning.policy.algorithms.sac import SACConfig, SACPolicy, SquashedGaussianActor
from rlightning.policy.base_policy import PolicyRole
from rlightning.policy.networks.gsde import GSDEActor, StateDependentNoise
from rlightning.types import EnvMeta
from rlightning.utils.config import PolicyConfig, load_preset
from tests.support.policy_data import CONTINUOUS_META, offpolicy_dataset

LOW = np.array([-2.0, 0.0], np.float32)
HIGH = np.array([2.0, 1.0], np.float32)


def make(meta=CONTINUOUS_META, role=PolicyRole.TRAIN, **cfg) -> SACPolicy:
    cfg.setdefault("hidden_sizes", [16, 8])
    cfg.setdefault("activation", "relu")
    cfg.setdefault("use_sde", True)
    policy = SACPolicy(PolicyConfig(type="sac", **cfg), role_type=role)
    policy.setup(meta, seed=0)
    return policy


def actor(log_std_init=-1.0, **noise_kw) -> GSDEActor:
    torch.manual_seed(0)
    noise = StateDependentNoise(8, 2, log_std_init=log_std_init, **noise_kw)
    return GSDEActor(5, LOW, HIGH, [16, 8], "relu", noise)


def test_log_prob_matches_an_independent_normal_with_the_tanh_correction():
    net = actor()
    with torch.no_grad():  # spread the std entries so that a wrong reduction would show
        net.noise.log_std.copy_(torch.linspace(-2.0, 0.5, 16).reshape(8, 2))
    x = torch.randn(64, 5, generator=torch.Generator().manual_seed(0))
    w = net.noise.sample_matrices(64).detach()
    action, log_prob = net(x, exploration_matrix=w)
    assert action.shape == (64, 2) and log_prob.shape == (64,)
    mean, latent = (t.detach().double() for t in net.mean_and_latent(x))
    sigma = net.noise.log_std.detach().double().exp()
    # variance per action dim j: sum_i theta_i^2 sigma_ij^2, written as an explicit sum over the latent features
    var = torch.stack([sum(latent[:, i] ** 2 * sigma[i, j] ** 2 for i in range(8)) for j in range(2)], dim=-1)
    u = mean + torch.einsum("bi,bij->bj", latent, w.double())
    scale, bias = torch.as_tensor((HIGH - LOW) / 2).double(), torch.as_tensor((HIGH + LOW) / 2).double()
    torch.testing.assert_close(action.double(), torch.tanh(u) * scale + bias, rtol=1e-5, atol=1e-5)
    correction = torch.log(scale * (1 - torch.tanh(u) ** 2) + 1e-6)
    expected = Normal(mean, (var + 1e-6).sqrt()).log_prob(u) - correction
    torch.testing.assert_close(log_prob.double(), expected.sum(-1), rtol=1e-4, atol=1e-4)


def test_a_training_forward_draws_each_row_from_its_states_distribution():
    # No matrix given (a training batch): every row an independent draw of N(mu(s), var(s)) before the squash,
    # the distribution a matrix of its own per row gives, with gradients reaching log_std.
    net = actor(log_std_init=-1.5)
    x = torch.randn(1, 5, generator=torch.Generator().manual_seed(1)).expand(40000, 5)
    torch.manual_seed(3)
    action, log_prob = net(x)
    scale, bias = torch.as_tensor((HIGH - LOW) / 2), torch.as_tensor((HIGH + LOW) / 2)
    u = torch.atanh(((action.detach() - bias) / scale).double().clamp(-1 + 1e-7, 1 - 1e-7))
    mean, latent = (t.detach().double() for t in net.mean_and_latent(x[:1]))
    var = net.noise.variance(latent.float()).detach().double()
    assert not torch.allclose(action[0], action[1])  # rows of one state draw apart
    torch.testing.assert_close(u.mean(0), mean[0], rtol=0, atol=float(4 * (var[0] / 40000).sqrt().max()))
    torch.testing.assert_close(u.var(0) / var[0], torch.ones(2, dtype=torch.float64), rtol=0, atol=0.04)
    log_prob.mean().backward()
    assert net.noise.log_std.grad is not None and net.noise.log_std.grad.abs().sum() > 0


def test_noise_has_the_state_dependent_variance():
    noise = StateDependentNoise(3, 2, log_std_init=0.0)
    with torch.no_grad():
        noise.log_std.copy_(torch.tensor([[0.0, -1.0], [0.5, 0.0], [-0.5, 0.3]]))
    theta = torch.tensor([[1.0, 2.0, -1.0]]).expand(20000, 3)
    torch.manual_seed(1)
    samples = noise.noise(theta, noise.sample_matrices(20000))
    expected = (theta[0] ** 2) @ (noise.log_std.exp() ** 2)
    torch.testing.assert_close(samples.var(0), expected, rtol=0.05, atol=0.0)
    torch.testing.assert_close(noise.variance(theta[:1])[0], expected + 1e-6)
    assert samples.mean(0).abs().max() < 0.05 * expected.sqrt().max()


def test_same_matrix_same_state_same_noise_and_it_is_linear_in_the_features():
    noise = StateDependentNoise(4, 2)
    w = noise.sample_matrices()
    theta = torch.randn(6, 4)
    torch.testing.assert_close(noise.noise(theta, w), noise.noise(theta, w))
    torch.testing.assert_close(noise.noise(2 * theta, w), 2 * noise.noise(theta, w))
    per_row = w.expand(6, 4, 2)
    torch.testing.assert_close(noise.noise(theta, per_row), noise.noise(theta, w))


def test_deterministic_is_the_squashed_mean():
    net = actor()
    x = torch.randn(7, 5)
    action, _ = net(x, deterministic=True)
    mean, _ = net.mean_and_latent(x)
    torch.testing.assert_close(action, torch.tanh(mean) * net.scale + net.bias)


def test_mean_is_clipped_before_the_squash():
    net = actor()
    with torch.no_grad():
        net.mu[0].bias.fill_(50.0)
    mean, _ = net.mean_and_latent(torch.randn(3, 5))
    assert torch.all(mean == 2.0)


def test_shapes_of_std_and_matrices():
    shared = StateDependentNoise(8, 3, full_std=False)
    assert shared.log_std.shape == (8, 1) and shared.std().shape == (8, 3)
    assert shared.sample_matrices().shape == (8, 3) and shared.sample_matrices(5).shape == (5, 8, 3)
    with pytest.raises(ValueError, match=r"4 exploration matrices for a batch of 2 rows"):
        shared.noise(torch.randn(2, 8), shared.sample_matrices(4))
    with pytest.raises(ValueError, match=r"must be \[8, 3\] or \[batch, 8, 3\], got \[3, 8\]"):
        shared.noise(torch.randn(2, 8), torch.randn(3, 8))


def test_expln_std_is_exp_below_zero_and_log_above():
    noise = StateDependentNoise(1, 3, use_expln=True)
    with torch.no_grad():
        noise.log_std.copy_(torch.tensor([[-1.0, 0.0, 2.0]]))
    torch.testing.assert_close(noise.std()[0], torch.tensor([np.exp(-1.0), 1.0, np.log1p(2.0) + 1.0]).float())


def test_bad_sizes_and_settings_are_rejected():
    with pytest.raises(ValueError, match="latent_dim >= 1 and act_dim >= 1"):
        StateDependentNoise(0, 2)
    with pytest.raises(ValueError, match="noise built for latent 4 x action 2, the network has latent 8 x action 2"):
        GSDEActor(5, LOW, HIGH, [16, 8], "relu", StateDependentNoise(4, 2))
    with pytest.raises(ValueError, match="sde_sample_freq must be -1"):
        SACConfig(type="sac", sde_sample_freq=0)


def test_default_config_keeps_the_gaussian_actor():
    policy = make(use_sde=False)
    assert isinstance(policy.actor, SquashedGaussianActor)
    cfg = SACConfig(type="sac")
    assert not cfg.use_sde and cfg.sde_sample_freq == -1


def test_acting_noise_stays_until_sample_freq_steps():
    policy = make(sde_sample_freq=3, log_std_init=0.0)
    obs = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    first = [policy.compute_actions(obs)["action"] for _ in range(3)]
    np.testing.assert_array_equal(first[0], first[1])
    np.testing.assert_array_equal(first[0], first[2])
    fourth = policy.compute_actions(obs)["action"]
    assert not np.allclose(fourth, first[0])
    assert not np.allclose(first[0][0], first[0][1]) or not np.allclose(obs[0], obs[1])
    # one matrix per acting row: identical observations in two rows get different noise
    same = np.repeat(obs[:1], 4, axis=0)
    rows = policy.compute_actions(same)["action"]
    assert not np.allclose(rows[0], rows[1])
    det = policy.compute_actions(same, deterministic=True)["action"]
    np.testing.assert_array_equal(det[0], det[1])


def test_once_per_phase_resamples_when_new_weights_arrive():
    policy = make(log_std_init=0.0)  # sde_sample_freq -1
    obs = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    a = [policy.compute_actions(obs)["action"] for _ in range(20)]
    assert all(np.array_equal(a[0], b) for b in a)
    policy.set_weight_version(policy.weight_version + 1)
    assert not np.allclose(policy.compute_actions(obs)["action"], a[0])
    single = policy.compute_actions(obs[:1])["action"]  # a batch of another size draws its own matrices
    assert single.shape == (1, 2)


def test_acting_copy_uses_the_same_rule_and_the_synced_std():
    train = make(sde_sample_freq=2, log_std_init=-0.5)
    with torch.no_grad():
        train.actor.noise.log_std.add_(0.25)
    copy = EvalCopyFactory(SACPolicy, train.config, CONTINUOUS_META, seed=3)(0)
    assert isinstance(copy.actor, GSDEActor) and "qf" not in copy.modules
    copy.load_state_dict(train.get_weights(), weight_version=1)
    torch.testing.assert_close(copy.actor.noise.log_std, train.actor.noise.log_std)
    obs = np.random.default_rng(2).standard_normal((3, 3)).astype(np.float32)
    a1, a2, a3 = (copy.compute_actions(obs)["action"] for _ in range(3))
    np.testing.assert_array_equal(a1, a2)
    assert not np.allclose(a1, a3)
    np.testing.assert_array_equal(
        copy.compute_actions(obs, deterministic=True)["action"],
        train.compute_actions(obs, deterministic=True)["action"],
    )


def test_train_step_with_sde_learns_the_std():
    policy = make(policy_frequency=1, autotune_alpha=False, alpha=0.1, log_std_init=-1.0)
    before = policy.actor.noise.log_std.detach().clone()
    for seed in range(3):
        policy.update_dataset(offpolicy_dataset(seed=seed))
        metrics = policy.train()
    assert all(np.isfinite(v) for v in metrics.values())
    assert not torch.equal(before, policy.actor.noise.log_std.detach())
    assert policy.actor.noise.log_std.grad is not None


def test_features_detached_unless_learned():
    for learn, expect_grad in ((False, False), (True, True)):
        net = actor(learn_features=learn)
        x = torch.randn(4, 5)
        _, latent = net.mean_and_latent(x)
        noise = net.noise.noise(latent, net.noise.sample_matrices())
        assert noise.requires_grad  # through log_std
        first = net.latent[0].weight
        grad = torch.autograd.grad(noise.sum(), first, allow_unused=True)[0]
        assert (grad is not None) is expect_grad


def test_checkpoint_round_trips_the_sde_parameters(tmp_path):
    policy = make(policy_frequency=1)
    policy.setup_optimizer(policy.config.optim)
    for seed in range(2):
        policy.update_dataset(offpolicy_dataset(seed=seed))
        policy.train()
    path = policy.save_checkpoint(tmp_path / "sac.pt")
    restored = make(log_std_init=1.0)
    restored.setup_optimizer(restored.config.optim)
    restored.load_checkpoint(path)
    torch.testing.assert_close(restored.actor.noise.log_std, policy.actor.noise.log_std)
    obs = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    np.testing.assert_array_equal(
        restored.compute_actions(obs, deterministic=True)["action"],
        policy.compute_actions(obs, deterministic=True)["action"],
    )


def test_mountaincar_preset_builds_a_gsde_actor():
    cfg = load_preset("mountaincar_sac")
    assert cfg.env.name == "MountainCarContinuous-v0"
    pc = cfg.policy
    assert pc.use_sde and pc.sde_sample_freq == -1 and pc.log_std_init == pytest.approx(-3.67)
    assert (pc.gamma, pc.tau, pc.alpha, pc.autotune_alpha) == (0.9999, 0.01, 0.1, False)
    assert (cfg.train.rollout_steps, cfg.train.updates_per_iteration, cfg.train.batch_size) == (32, 32, 512)
    env = gym.make("MountainCarContinuous-v0")
    meta = EnvMeta("MountainCarContinuous-v0-0", env.action_space, env.observation_space, 1)
    env.close()
    policy = SACPolicy(pc, role_type=PolicyRole.TRAIN)
    policy.setup(meta, seed=0)
    assert isinstance(policy.actor, GSDEActor)
    assert policy.actor.noise.log_std.shape == (64, 1)
    torch.testing.assert_close(policy.actor.noise.log_std.detach(), torch.full((64, 1), -3.67))
