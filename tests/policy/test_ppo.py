"""PPO (rlightning/policy/algorithms/ppo.py): acting, dataset checks, updates, learning."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.algorithms.ppo import PPOPolicy
from rlightning.policy.base_policy import PolicyRole
from rlightning.types import EnvMeta
from rlightning.utils.config import OptimConfig, PolicyConfig
from rlightning.utils.registry import POLICIES
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META, cartpole_ppo_rollout, env_ret, ppo_dataset

METRICS = {"policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "lr"}


def make(meta=DISCRETE_META, role=PolicyRole.TRAIN, **cfg) -> PPOPolicy:
    cfg.setdefault("hidden_sizes", [32])
    policy = PPOPolicy(PolicyConfig(**cfg), role_type=role)
    policy.setup(meta, seed=0)
    return policy


def test_registered_as_ppo():
    assert POLICIES.get("ppo") is PPOPolicy


def test_discrete_actions_are_int64_in_the_action_space():
    resp = make().rollout_step(env_ret("e", num_envs=32))
    assert resp.action.dtype == np.int64 and set(np.unique(resp.action)) <= {0, 1}
    assert resp.log_prob.dtype == np.float32 and (resp.log_prob <= 0).all()


def test_discrete_action_space_with_start_offset():
    meta = EnvMeta("e", gym.spaces.Discrete(3, start=5), DISCRETE_META.observation_space, 1)
    policy = make(meta)
    resp = policy.rollout_step(env_ret("e", num_envs=64))
    assert set(np.unique(resp.action)) <= {5, 6, 7}
    td = ppo_dataset(8)
    td["action"] = torch.as_tensor(resp.action[:8])
    policy.update_dataset(td)
    assert int(policy.dataset["action"].max()) <= 2


def test_continuous_actions_are_clipped_and_raw_sample_is_kept():
    policy = make(CONTINUOUS_META)
    policy.actor.log_std.data.fill_(2.0)  # wide enough to leave the Box
    resp = policy.rollout_step(env_ret("e", num_envs=64, obs_dim=3))
    assert resp.action.shape == (64, 2) and resp.action.dtype == np.float32
    assert (np.abs(resp.action) <= 2.0).all()
    assert (np.abs(resp.raw_action) > 2.0).any()
    np.testing.assert_array_equal(np.clip(resp.raw_action, -2, 2), resp.action)
    assert resp.log_prob.shape == (64,)


@pytest.mark.parametrize(
    ("space", "match"),
    [
        (gym.spaces.Tuple((gym.spaces.Discrete(2),)), "policy 'ppo' supports Discrete, MultiDiscrete, MultiBinary"),
        (gym.spaces.Box(-1, 1, (2, 2)), r"policy 'ppo' supports Discrete, MultiDiscrete, MultiBinary, 1-D Box .*Box"),
    ],
)
def test_unsupported_action_spaces_are_named(space, match):
    meta = EnvMeta("e", space, DISCRETE_META.observation_space, 1)
    with pytest.raises(ValueError, match=match):
        make(meta)


def test_unsupported_observation_space_is_named():
    meta = EnvMeta("e", gym.spaces.Discrete(2), gym.spaces.Dict({"a": gym.spaces.Text(3)}), 1)
    with pytest.raises(ValueError, match="observation entry 'a' of Dict space: .* Tuple observation spaces, got Text"):
        make(meta)


def test_env_meta_must_carry_spaces():
    with pytest.raises(TypeError, match="needs an EnvMeta, got dict"):
        make({"action_space": 1})
    with pytest.raises(ValueError, match="env_meta.action_space is None for env 'x'"):
        make(EnvMeta("x", None, DISCRETE_META.observation_space, 1))


def test_update_dataset_checks_type_keys_and_size():
    policy = make()
    with pytest.raises(TypeError, match="needs a TensorDict, got dict"):
        policy.update_dataset({"obs": 1})
    td = ppo_dataset(16)
    del td["advantage"]
    with pytest.raises(KeyError, match=r"missing keys \['advantage'\]"):
        policy.update_dataset(td)
    with pytest.raises(ValueError, match="got 2 transitions, fewer than num_minibatches=4"):
        policy.update_dataset(ppo_dataset(2))
    with pytest.raises(RuntimeError, match="before update_dataset"):
        policy.train()


def test_train_runs_epochs_times_minibatches_and_reports_metrics():
    policy = make(update_epochs=3, num_minibatches=2)
    before = policy.weights_checksum()
    policy.update_dataset(ppo_dataset(40))
    metrics = policy.train()
    assert set(metrics) == METRICS
    assert all(isinstance(v, float) for v in metrics.values())
    assert policy.update_count == 6 and policy.train_calls == 1
    assert policy.weights_checksum() != before


def test_update_dataset_accepts_multi_dim_batches():
    policy = make()
    policy.update_dataset(ppo_dataset(32).reshape(4, 8))
    assert policy.dataset["obs"].shape == (32, 4)
    assert "policy_loss" in policy.train()


def test_target_kl_stops_the_epochs_early():
    policy = make(update_epochs=10, num_minibatches=2, target_kl=1e-12, optim=OptimConfig(lr=1e-2))
    policy.update_dataset(ppo_dataset(32))
    policy.train()
    assert policy.update_count == 2


def test_eval_worker_has_no_optimizer():
    policy = make(role=PolicyRole.EVAL)
    policy.update_dataset(ppo_dataset())
    with pytest.raises(RuntimeError, match="needs setup_optimizer"):
        policy.train()


def test_anneal_lr_follows_set_schedule():
    policy = make(optim=OptimConfig(lr=1e-3, anneal_lr=True))
    policy.set_schedule(4)
    lrs = []
    for _ in range(3):
        policy.update_dataset(ppo_dataset())
        lrs.append(policy.train()["lr"])
    assert lrs == pytest.approx([1e-3, 7.5e-4, 5e-4])


def test_anneal_lr_ends_at_the_env_step_budget_when_that_ends_the_run_first():
    # 1000 iterations but a 400-step budget: the schedule follows the env steps (as SB3's progress does).
    policy = make(optim=OptimConfig(lr=1e-3, anneal_lr=True))
    policy.set_schedule(1000, total_env_steps=400)
    lrs = []
    for steps in (100, 200, 300, 400):
        policy.set_env_steps(steps)
        policy.update_dataset(ppo_dataset())
        lrs.append(policy.train()["lr"])
    assert lrs == pytest.approx([7.5e-4, 5e-4, 2.5e-4, 0.0])
    assert policy.extra_checkpoint_state() == {"total_iterations": 1000, "total_env_steps": 400}
    fresh = make(optim=OptimConfig(lr=1e-3, anneal_lr=True))
    fresh.load_extra_checkpoint_state(policy.extra_checkpoint_state())
    assert (fresh.total_iterations, fresh.total_env_steps) == (1000, 400)


def test_anneal_lr_ends_at_the_iterations_when_they_end_the_run_first():
    policy = make(optim=OptimConfig(lr=1e-3, anneal_lr=True))
    policy.set_schedule(2, total_env_steps=10_000)
    policy.set_env_steps(100)
    policy.update_dataset(ppo_dataset())
    assert policy.train()["lr"] == pytest.approx(1e-3 * (1 - 100 / 10_000))  # call 0 of 2: the env steps lead
    policy.set_env_steps(200)
    policy.update_dataset(ppo_dataset())
    assert policy.train()["lr"] == pytest.approx(5e-4)  # call 1 of 2: the iterations lead


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, "100"])
def test_set_schedule_rejects_a_bad_env_step_budget(bad):
    with pytest.raises(ValueError, match="total_env_steps"):
        make().set_schedule(10, total_env_steps=bad)


def _exact_dataset(policy, ratio: float, value_shift: float, return_shift: float, n: int = 16) -> TensorDict:
    """A dataset on which the first update's losses are known: every probability ratio is ``ratio``, every
    old value is the current prediction + ``value_shift``, every return the prediction + ``return_shift``;
    advantages are all 1 (left unnormalised: ``norm_adv=False``)."""
    td = ppo_dataset(n)
    with torch.no_grad():
        x = policy.encoder(td["obs"])
        logp, _ = policy.log_prob_entropy(x, td["action"])
        value = policy.critic(x).squeeze(-1)
    td["log_prob"] = logp - float(np.log(ratio))
    td["value"] = value + value_shift
    td["return"] = value + return_shift
    td["advantage"] = torch.ones(n)
    return td


def _first_update(**cfg):
    return make(update_epochs=1, num_minibatches=1, norm_adv=False, **cfg)


def test_anneal_clip_follows_set_schedule_in_the_clipped_objective():
    # ratio 1.3 and advantage 1: the clipped objective is -min(1.3, 1 + clip), so the loss names the clip used.
    policy = _first_update(clip_coef=0.2, anneal_clip=True)
    policy.set_schedule(4)
    losses, clips = [], []
    for _ in range(3):
        policy.update_dataset(_exact_dataset(policy, ratio=1.3, value_shift=0.0, return_shift=0.0))
        metrics = policy.train()
        losses.append(metrics["policy_loss"])
        clips.append(metrics["clip_coef"])
    assert clips == pytest.approx([0.2, 0.15, 0.1])
    assert losses == pytest.approx([-1.2, -1.15, -1.1], abs=1e-5)
    assert policy.extra_checkpoint_state() == {"total_iterations": 4, "total_env_steps": 0}


def test_clip_is_constant_without_anneal_clip():
    policy = _first_update(clip_coef=0.2)
    policy.set_schedule(4)
    for _ in range(2):
        policy.update_dataset(_exact_dataset(policy, ratio=1.3, value_shift=0.0, return_shift=0.0))
        metrics = policy.train()
        assert metrics["policy_loss"] == pytest.approx(-1.2, abs=1e-5) and "clip_coef" not in metrics
        assert metrics["clipfrac"] == 1.0


@pytest.mark.parametrize(
    ("options", "value_loss"),
    [
        # old value 2 below the prediction, return 1 above it: unclipped (new - ret)^2 = 1.
        ({"clip_vloss": False}, 0.5 * 1.0),
        # clipped to old + 0.2 = prediction - 1.8: (−2.8)^2 = 7.84 is the larger.
        ({"clip_vloss": True}, 0.5 * 2.8**2),
        ({"clip_vloss": True, "vf_clip_coef": 0.5}, 0.5 * 2.5**2),
        ({"clip_vloss": True, "vf_clip_coef": 5.0}, 0.5 * 1.0),  # the clip does not bind
    ],
)
def test_value_clip_range(options, value_loss):
    policy = _first_update(clip_coef=0.2, **options)
    policy.update_dataset(_exact_dataset(policy, ratio=1.0, value_shift=-2.0, return_shift=1.0))
    assert policy.train()["value_loss"] == pytest.approx(value_loss, rel=1e-5)


def test_value_clip_follows_the_annealed_clip_unless_set():
    policy = _first_update(clip_coef=0.2, anneal_clip=True)
    policy.set_schedule(2)
    for expected in (0.5 * 2.8**2, 0.5 * 2.9**2):  # clips 0.2 then 0.1
        policy.update_dataset(_exact_dataset(policy, ratio=1.0, value_shift=-2.0, return_shift=1.0))
        assert policy.train()["value_loss"] == pytest.approx(expected, rel=1e-5)


def test_discrete_training_pass_matches_torch_categorical():
    policy = make()
    td = ppo_dataset(32)
    x = policy.encoder(td["obs"])
    logp, entropy, value = policy._train_forward(x, td["action"])
    dist = torch.distributions.Categorical(logits=policy.actor(x))
    torch.testing.assert_close(logp, dist.log_prob(td["action"]))
    torch.testing.assert_close(entropy, dist.entropy())
    torch.testing.assert_close(value, policy.critic(x).squeeze(-1))
    (logp.sum() + entropy.sum()).backward()  # gradients reach the actor
    assert all(p.grad is not None for p in policy.actor.parameters())


def test_fused_optimizer_builds_a_fused_adam():
    assert make(fused_optimizer=True)._optimizers["main"].defaults["fused"] is True
    assert not make()._optimizers["main"].defaults.get("fused")


def test_vf_clip_coef_must_be_positive():
    with pytest.raises(ValueError, match="vf_clip_coef"):
        PolicyConfig(type="ppo", vf_clip_coef=0.0)


def test_obs_normalisation_statistics_update_after_train():
    policy = make(norm_obs=True)
    td = ppo_dataset(64)
    td["obs"] = td["obs"] * 3.0 + 5.0
    policy.update_dataset(td)
    policy.train()
    np.testing.assert_allclose(policy.encoder.rms.mean.numpy(), td["obs"].mean(0).double().numpy(), atol=1e-2)
    assert "encoder.rms.mean" in policy.get_weights()


def test_buffer_postprocess_fn_is_gae_with_the_config_values():
    fn = PPOPolicy.buffer_postprocess_fn(PolicyConfig(gamma=0.5, gae_lambda=1.0))
    episode = TensorDict(
        {
            "reward": torch.tensor([1.0, 1.0]),
            "value": torch.tensor([0.0, 0.0]),
            "terminated": torch.tensor([False, True]),
            "truncated": torch.tensor([False, False]),
            "done": torch.tensor([False, True]),
        },
        batch_size=[2],
    )
    out = fn(episode, None)
    np.testing.assert_allclose(out["advantage"].numpy(), [1.5, 1.0])
    np.testing.assert_allclose(out["return"].numpy(), [1.5, 1.0])


def _bandit_dataset(policy, obs, reward_fn, continuous):
    out = policy.compute_actions(obs)
    action = out["raw_action"] if continuous else out["action"]
    reward = reward_fn(out["action"], obs).astype(np.float32)
    key = "raw_action" if continuous else "action"
    return TensorDict(
        {
            "obs": torch.as_tensor(obs),
            key: torch.as_tensor(action),
            "log_prob": torch.as_tensor(out["log_prob"]),
            "value": torch.as_tensor(out["value"]),
            "advantage": torch.as_tensor(reward - out["value"]),
            "return": torch.as_tensor(reward),
        },
        batch_size=[obs.shape[0]],
    )


def test_continuous_ppo_learns_a_one_step_bandit():
    meta = EnvMeta("b", gym.spaces.Box(-2.0, 2.0, (1,), np.float32), gym.spaces.Box(-1.0, 1.0, (1,), np.float32), 1)
    policy = make(meta, optim=OptimConfig(lr=3e-3))
    rng = np.random.default_rng(0)
    test_obs = rng.uniform(-1, 1, (256, 1)).astype(np.float32)

    def mse() -> float:
        return float(np.mean((policy.compute_actions(test_obs, deterministic=True)["action"] - test_obs) ** 2))

    before = mse()
    for _ in range(40):
        obs = rng.uniform(-1, 1, (256, 1)).astype(np.float32)
        policy.update_dataset(_bandit_dataset(policy, obs, lambda a, o: -((a - o) ** 2).sum(-1), True))
        policy.train()
    assert before > 0.2
    assert mse() < 0.05


def test_discrete_ppo_learns_a_contextual_bandit():
    policy = make()
    rng = np.random.default_rng(1)

    def reward_fn(action, obs):
        return (action == (obs[:, 0] > 0)).astype(np.float32)

    for _ in range(30):
        obs = rng.standard_normal((256, 4)).astype(np.float32)
        policy.update_dataset(_bandit_dataset(policy, obs, reward_fn, False))
        policy.train()
    obs = rng.standard_normal((512, 4)).astype(np.float32)
    accuracy = reward_fn(policy.compute_actions(obs, deterministic=True)["action"], obs).mean()
    assert accuracy > 0.9


def _greedy_return(policy, episodes: int = 3) -> float:
    env = gym.make("CartPole-v1")
    total = 0.0
    for ep in range(episodes):
        obs, _ = env.reset(seed=100 + ep)
        done = False
        while not done:
            action = policy.compute_actions(obs[None].astype(np.float32), deterministic=True)["action"][0]
            obs, reward, terminated, truncated, _ = env.step(int(action))
            total += reward
            done = terminated or truncated
    env.close()
    return total / episodes


@pytest.mark.slow
def test_ppo_learns_cartpole():
    torch.manual_seed(0)
    envs = gym.make_vec(
        "CartPole-v1",
        num_envs=4,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    obs, _ = envs.reset(seed=0)
    meta = EnvMeta("cp", envs.single_action_space, envs.single_observation_space, 4)
    policy = make(meta, hidden_sizes=[64, 64], optim=OptimConfig(lr=1e-3), ent_coef=0.01)
    returns: list = []
    greedy = []
    for iteration in range(1, 31):  # at most 15k env steps
        td, obs = cartpole_ppo_rollout(policy, envs, obs, 128, 0.99, 0.95, returns)
        policy.update_dataset(td)
        policy.train()
        if iteration % 5 == 0:
            greedy.append(_greedy_return(policy))
            if greedy[-1] >= 195:
                break
    envs.close()
    assert greedy[-1] >= 195, f"greedy returns every 5 iterations: {greedy}"
