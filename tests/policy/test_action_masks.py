"""Action masks: masked choices are never drawn (statistically, per algorithm), the masked distribution is the
softmax over the allowed logits, the DQN family's greedy choices and target max respect them, and a masked PPO
learner never takes a masked action and learns faster than one that must learn to avoid them."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlightning.env.action_masks import InfoActionMask
from rlightning.policy.networks.masks import (
    LogitMask,
    action_mask,
    mask_logits,
    mask_q,
    masked_log_softmax,
    masked_uniform,
)
from rlightning.types import EnvMeta
from rlightning.utils.config import config_from_dict
from rlightning.utils.registry import POLICIES

N = 5


def _policy(kind: str, role: str = "eval", **extra):
    import rlightning.policy  # noqa: F401 - registers the algorithms
    from rlightning.policy.base_policy import PolicyRole

    obs_space = gym.spaces.Dict(
        {"observation": gym.spaces.Box(-1, 1, (3,), np.float32), "action_mask": gym.spaces.MultiBinary(N)}
    )
    meta = EnvMeta(observation_space=obs_space, action_space=gym.spaces.Discrete(N, start=2))
    cfg = config_from_dict({"policy": {"type": kind, "hidden_sizes": [8], **extra}}).policy
    policy = POLICIES.get(kind)(cfg, role_type=PolicyRole(role))
    policy.construct_network(meta)
    return policy


def _batch(rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    mask = (rng.random((rows, N)) < 0.4).astype(np.int8)
    mask[np.arange(rows), rng.integers(0, N, rows)] = 1  # at least one allowed
    obs = {"observation": rng.uniform(-1, 1, (rows, 3)).astype(np.float32), "action_mask": mask}
    return obs, mask


@pytest.mark.parametrize("kind, extra", [("ppo", {}), ("a2c", {}), ("appo", {}), ("impala", {}), ("dqn", {})])
def test_masked_actions_are_never_drawn(kind, extra):
    policy = _policy(kind, **extra)
    if kind == "dqn":
        policy.set_env_steps(0)  # epsilon at its start: mostly uniform exploration
    obs, mask = _batch(4000)
    for deterministic in (False, True):
        action = policy.compute_actions(obs, deterministic=deterministic)["action"] - 2
        assert action.min() >= 0 and action.max() < N
        taken = mask[np.arange(len(action)), action]
        assert taken.all(), f"{kind} drew {int((taken == 0).sum())} masked actions (deterministic={deterministic})"


def test_masked_draws_follow_the_softmax_over_allowed_logits():
    policy = _policy("ppo")
    rows = 20000
    obs = {
        "observation": np.tile(np.array([[0.3, -0.2, 0.5]], np.float32), (rows, 1)),
        "action_mask": np.tile(np.array([[1, 0, 1, 1, 0]], np.int8), (rows, 1)),
    }
    with torch.no_grad():  # the actor pushed away from uniform, so the check sees the logits
        policy.actor[-1].weight.normal_(0.0, 1.0)
    out = policy.compute_actions(obs, deterministic=False)
    counts = np.bincount(out["action"] - 2, minlength=N) / rows
    x = policy.encoder({"observation": torch.as_tensor(obs["observation"][:1])})
    logits = policy.actor(x)[0]
    expect = torch.softmax(mask_logits(logits, torch.tensor([[1, 0, 1, 1, 0]]).bool())[0], -1).detach().numpy()
    assert counts[1] == 0 and counts[4] == 0
    np.testing.assert_allclose(counts, expect, atol=0.02)
    # the stored log-probabilities are those of the masked distribution
    np.testing.assert_allclose(np.exp(out["log_prob"][:1]), expect[out["action"][0] - 2], rtol=1e-4)


def test_an_eval_copy_acts_on_a_masked_dict_observation_in_numpy_as_torch_would(monkeypatch):
    """PPO's eval-role copies act in numpy on a Dict observation of vectors with its mask (no torch op per step):
    the same actions, log-probabilities and values as the torch path, up to float rounding."""
    policy = _policy("ppo")
    with torch.no_grad():
        policy.actor[-1].weight.normal_(0.0, 1.0)
    obs, mask = _batch(256, seed=3)
    with torch.no_grad():
        want = policy._act_torch(obs, True, True, action_mask(obs))
    monkeypatch.setattr(policy, "_act_torch", lambda *a, **k: pytest.fail("acted in torch"))
    got = policy.compute_actions(obs, deterministic=True)
    np.testing.assert_array_equal(got["action"], want["action"])
    np.testing.assert_allclose(got["log_prob"], want["log_prob"], atol=1e-5)
    np.testing.assert_allclose(got["value"], want["value"], atol=1e-5)
    assert mask[np.arange(256), got["action"] - 2].all()


def test_learner_log_prob_and_entropy_see_the_mask():
    policy = _policy("ppo", role="train")
    obs, mask = _batch(64, seed=3)
    tobs = {k: torch.as_tensor(v) for k, v in obs.items()}
    x = policy.encoder(tobs)
    allowed = torch.as_tensor(mask).bool()
    action = torch.as_tensor(np.argmax(mask, axis=1))
    logp, entropy, _ = policy._train_forward(x, action, action_mask(tobs))
    logits = policy.actor(x)
    ref = torch.distributions.Categorical(logits=logits.masked_fill(~allowed, -1e9))
    torch.testing.assert_close(logp, ref.log_prob(action), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy, ref.entropy(), atol=1e-5, rtol=1e-5)
    plain, _, _ = policy._train_forward(x, action, None)
    assert (logp >= plain - 1e-6).all() and (logp > plain + 1e-4).any()


@pytest.mark.parametrize("prepared", [False, True])
def test_masked_log_softmax_is_the_log_softmax_of_the_masked_logits_with_its_gradients(prepared):
    """The learner's masked log-probabilities and entropy (computed without an exp of a disallowed entry) equal
    log_softmax over `mask_logits`, values and gradients; a row that allows nothing is unmasked; a `LogitMask`
    made once for a dataset and taken per minibatch gives the same."""
    gen = torch.Generator().manual_seed(0)
    logits = (3 * torch.randn(64, N, generator=gen)).requires_grad_(True)
    allowed = torch.rand(64, N, generator=gen) < 0.5
    allowed[:, 0] |= ~allowed.any(-1)
    allowed[7] = False  # nothing allowed: acts unmasked
    action = torch.multinomial((allowed | ~allowed.any(-1, keepdim=True)).float(), 1, generator=gen).squeeze(-1)
    ref_logp = torch.log_softmax(mask_logits(logits, allowed), -1)
    ref_entropy = torch.distributions.Categorical(logits=mask_logits(logits, allowed)).entropy()
    idx = torch.randperm(64, generator=gen)[:40]
    rows = idx if prepared else torch.arange(64)
    logp, entropy = masked_log_softmax(logits[rows], LogitMask.of(allowed, N).rows(idx) if prepared else allowed)
    assert torch.equal(logp < -1e30, ~(allowed | ~allowed.any(-1, keepdim=True))[rows])  # disallowed: lowest value
    torch.testing.assert_close(logp, ref_logp[rows], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy, ref_entropy[rows], atol=1e-5, rtol=1e-5)
    loss = logp.gather(-1, action[rows, None]).sum() + 0.3 * entropy.sum()
    ref_loss = ref_logp[rows].gather(-1, action[rows, None]).sum() + 0.3 * ref_entropy[rows].sum()
    (grad,) = torch.autograd.grad(loss, logits)
    (ref_grad,) = torch.autograd.grad(ref_loss, logits)
    torch.testing.assert_close(grad, ref_grad, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="action_mask has 4 entries per row, the policy has 5 action logits"):
        masked_log_softmax(logits, LogitMask.of(torch.ones(64, 4, dtype=torch.bool), 4))


def test_dqn_target_max_and_exploration_respect_the_mask():
    q = torch.tensor([[5.0, 1.0, 3.0], [0.0, 9.0, 2.0]])
    mask = torch.tensor([[False, True, True], [True, False, False]])
    assert mask_q(q, mask).max(-1).values.tolist() == [3.0, 0.0]
    assert mask_q(q, torch.zeros_like(mask)).max(-1).values.tolist() == [5.0, 9.0]  # nothing allowed: unmasked
    rng = np.random.default_rng(0)
    draws = masked_uniform(mask.repeat(2000, 1), 3, np.arange(4000), rng)
    assert set(draws[0::2].tolist()) == {1, 2} and set(draws[1::2].tolist()) == {0}


def test_a_mask_of_the_wrong_width_is_refused_by_name():
    with pytest.raises(ValueError, match="action_mask has 4 entries per row, the policy has 5 action logits"):
        mask_logits(torch.zeros(2, 5), torch.ones(2, 4, dtype=torch.bool))


def test_info_action_mask_moves_the_mask_into_the_observation():
    class InfoMasked(gym.Env):
        observation_space = gym.spaces.Box(0, 1, (2,), np.float32)
        action_space = gym.spaces.Discrete(3)

        def reset(self, *, seed=None, options=None):
            return np.zeros(2, np.float32), {"action_mask": np.array([1, 0, 1])}

        def step(self, action):
            return np.ones(2, np.float32), 0.0, False, False, {}

    env = InfoActionMask(InfoMasked())
    obs, _ = env.reset()
    assert env.observation_space["action_mask"] == gym.spaces.MultiBinary(3)
    assert obs["action_mask"].tolist() == [1, 0, 1]
    obs, *_ = env.step(0)
    assert obs["action_mask"].tolist() == [1, 1, 1]  # no mask in info: everything allowed
    with pytest.raises(ValueError, match="masks Discrete and MultiDiscrete actions"):
        InfoActionMask(gym.make("Pendulum-v1"))


def _learn(tmp_path, build, expose_mask: bool, seed: int) -> list:
    cfg = config_from_dict(
        {
            "seed": seed,
            "env": {
                "name": "tests.support.penalty_mask_env:PenaltyMaskEnv",
                "num_envs": 8,
                "num_workers": 1,
                "env_kwargs": {"expose_mask": expose_mask},
            },
            "policy": {"type": "ppo", "hidden_sizes": [32], "num_minibatches": 4, "update_epochs": 4},
            "buffer": {"type": "rollout", "capacity": 256, "sampler": "all"},
            "train": {"iterations": 12, "rollout_steps": 32},
            "cluster": {
                "remote_env": False,
                "remote_eval": False,
                "remote_train": False,
                "remote_storage": False,
                "inference": "env_workers",
            },
            "log": {"progress": False, "run_dir": str(tmp_path / f"{expose_mask}-{seed}")},
        }
    )
    engine = build(cfg).engine
    return [engine.step() for _ in range(cfg.train.iterations)]


@pytest.mark.slow
def test_masked_ppo_never_takes_a_masked_action_and_learns_faster(tmp_path, build):
    """Over 3 seeds: with the mask every episode runs its 16 steps (a masked action would end it at -10), and
    the masked learner's mean return over the run beats the unmasked learner's, which pays for its mistakes."""
    for seed in (1, 2, 3):
        masked = _learn(tmp_path, build, True, seed)
        plain = _learn(tmp_path, build, False, seed)
        for m in masked:
            if m["episodes"]:
                assert m["episode_length_mean"] == 16 and m["episode_return_mean"] >= 16 * 0.2, m
        masked_mean = np.mean([m["episode_return_mean"] for m in masked if m["episodes"]])
        plain_mean = np.mean([m["episode_return_mean"] for m in plain if m["episodes"]])
        assert masked_mean > plain_mean + 2.0, (seed, masked_mean, plain_mean)
