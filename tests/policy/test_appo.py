"""IMPALA and APPO (rlightning/policy/algorithms/appo.py) and V-trace (policy/returns.py), checked by hand.

V-trace is checked against the paper's sum (Espeholt et al. 2018, eq. 1), written here as a double loop
with explicit products of the trace coefficients, and against small cases worked out on paper.
"""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.algorithms.appo import (
    POLICY_VERSION,
    APPOConfig,
    APPOPolicy,
    IMPALAConfig,
    IMPALAPolicy,
    appo_policy_loss,
    impala_policy_loss,
)
from rlightning.policy.returns import vtrace
from rlightning.utils.config import PolicyConfig
from rlightning.utils.registry import POLICIES
from tests.support.policy_data import CONTINUOUS_META, DISCRETE_META

# ---------------------------------------------------------------------- V-trace


def paper_vtrace(log_rho, r, v, nv, term, done, gamma, rho_bar, c_bar):
    """v_s = V(x_s) + sum_{t>=s} gamma^(t-s) (prod_{s<=i<t} c_i) rho_t delta_t, within the episode piece."""
    n = len(r)
    ratio = [math.exp(x) for x in log_rho]
    rho = [min(rho_bar, x) for x in ratio]
    c = [min(c_bar, x) for x in ratio]
    delta = [rho[t] * (r[t] + gamma * nv[t] * (1 - term[t]) - v[t]) for t in range(n)]
    vs = []
    for s in range(n):
        total, coef = 0.0, 1.0
        for t in range(s, n):
            total += coef * delta[t]
            if done[t]:
                break
            coef *= gamma * c[t]
        vs.append(v[s] + total)
    adv = []
    for s in range(n):
        v_next = nv[s] if (done[s] or s == n - 1) else vs[s + 1]
        adv.append(rho[s] * (r[s] + gamma * (1 - term[s]) * v_next - v[s]))
    return vs, adv


def test_vtrace_two_steps_by_hand():
    # gamma 0.5; pi/mu = 2 and 0.5 -> rho = c = (1, 0.5) with rho_bar = c_bar = 1
    log_rho = torch.log(torch.tensor([2.0, 0.5]))
    r, v, nv = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 1.0]), torch.tensor([1.0, 2.0])
    zeros = torch.zeros(2, dtype=torch.bool)
    vs, adv = vtrace(log_rho, r, v, nv, zeros, zeros, gamma=0.5)
    # delta_0 = 1 * (1 + 0.5 * 1 - 0.5) = 1; delta_1 = 0.5 * (2 + 0.5 * 2 - 1) = 1
    # v_1 = 1 + 1 = 2; v_0 = 0.5 + 1 + 0.5 * 1 * 1 = 2
    assert vs.tolist() == pytest.approx([2.0, 2.0])
    # adv_0 = 1 * (1 + 0.5 * v_1 - 0.5) = 1.5; adv_1 = 0.5 * (2 + 0.5 * V(x_2) - 1) = 1
    assert adv.tolist() == pytest.approx([1.5, 1.0])


def test_vtrace_termination_drops_the_bootstrap_truncation_keeps_it():
    log_rho = torch.log(torch.tensor([2.0, 0.5]))
    r, v, nv = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 1.0]), torch.tensor([1.0, 2.0])
    # terminated at step 1: delta_1 = 0.5 * (2 - 1) = 0.5; v_1 = 1.5; v_0 = 0.5 + 1 + 0.5 * 0.5 = 1.75
    term = torch.tensor([False, True])
    vs, adv = vtrace(log_rho, r, v, nv, term, term, gamma=0.5)
    assert vs.tolist() == pytest.approx([1.75, 1.5])
    assert adv.tolist() == pytest.approx([1.0 + 0.5 * 1.5 - 0.5, 0.5])
    # truncated after step 0 (done, not terminated): nothing of step 1 flows back; step 0 bootstraps on V(x_1)
    done = torch.tensor([True, False])
    vs, adv = vtrace(log_rho, r, v, nv, torch.zeros(2, dtype=torch.bool), done, gamma=0.5)
    assert vs.tolist() == pytest.approx([0.5 + 1.0, 2.0])
    assert adv.tolist() == pytest.approx([1.0 + 0.5 * 1.0 - 0.5, 1.0])


def test_vtrace_clips_rho_and_c_separately():
    # ratio 3 at step 0: rho_bar = 2 clips rho to 2, c_bar = 0.5 clips the trace to 0.5
    log_rho = torch.log(torch.tensor([3.0, 1.0]))
    r, v, nv = torch.tensor([1.0, 1.0]), torch.tensor([0.0, 0.0]), torch.tensor([0.0, 0.0])
    no = torch.zeros(2, dtype=torch.bool)
    vs, adv = vtrace(log_rho, r, v, nv, no, no, gamma=1.0, rho_bar=2.0, c_bar=0.5)
    # delta = (2 * 1, 1 * 1); v_1 = 1; v_0 = 2 + 1 * 0.5 * 1 = 2.5; adv_0 = 2 * (1 + v_1) = 4
    assert vs.tolist() == pytest.approx([2.5, 1.0])
    assert adv.tolist() == pytest.approx([4.0, 1.0])


def test_vtrace_matches_the_papers_sum_on_random_sequences():
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        n = 9
        log_rho = torch.randn(n, generator=g) * 0.7
        r, v, nv = (torch.randn(n, generator=g) for _ in range(3))
        term = torch.rand(n, generator=g) < 0.15
        done = term | (torch.rand(n, generator=g) < 0.15)
        vs, adv = vtrace(log_rho, r, v, nv, term, done, gamma=0.9, rho_bar=1.2, c_bar=0.8)
        want_vs, want_adv = paper_vtrace(
            log_rho.tolist(), r.tolist(), v.tolist(), nv.tolist(), term.int().tolist(), done.tolist(), 0.9, 1.2, 0.8
        )
        assert vs.tolist() == pytest.approx(want_vs, abs=1e-5)
        assert adv.tolist() == pytest.approx(want_adv, abs=1e-5)
        # batched (leading dims) gives the same rows
        vs2, _ = vtrace(*(x.expand(3, n) for x in (log_rho, r, v, nv, term, done)), gamma=0.9, rho_bar=1.2, c_bar=0.8)
        assert torch.allclose(vs2, vs.expand(3, n), atol=1e-6)


def test_vtrace_on_policy_is_the_n_step_return():
    r, v, nv = torch.tensor([1.0, 1.0, 1.0]), torch.tensor([0.3, -0.2, 0.1]), torch.tensor([-0.2, 0.1, 4.0])
    no = torch.zeros(3, dtype=torch.bool)
    vs, _ = vtrace(torch.zeros(3), r, v, nv, no, no, gamma=0.5)
    assert vs[0].item() == pytest.approx(1 + 0.5 + 0.25 + 0.125 * 4.0)


def test_vtrace_bad_clips():
    x = torch.zeros(2)
    with pytest.raises(ValueError, match="rho_bar and c_bar must be positive"):
        vtrace(x, x, x, x, x, x, rho_bar=0.0)


# ---------------------------------------------------------------------- the losses


def test_impala_policy_loss_by_hand():
    logp = torch.tensor([-0.5, -1.0, -2.0], requires_grad=True)
    adv = torch.tensor([2.0, -1.0, 0.5])
    loss = impala_policy_loss(logp, adv)
    assert loss.item() == pytest.approx(-(2.0 * -0.5 + -1.0 * -1.0 + 0.5 * -2.0) / 3)
    loss.backward()
    assert logp.grad.tolist() == pytest.approx([-2.0 / 3, 1.0 / 3, -0.5 / 3])


def test_appo_policy_loss_clips_like_ppo():
    old = torch.zeros(3)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.1])).requires_grad_(True)
    adv = torch.tensor([1.0, -1.0, 2.0])
    loss = appo_policy_loss(logp, old, adv, clip_coef=0.2)
    # min(1 * 1.5, 1 * 1.2) = 1.2; min(-1 * 0.5, -1 * 0.8) = -0.8; min(2 * 1.1, 2 * 1.1) = 2.2
    assert loss.item() == pytest.approx(-(1.2 - 0.8 + 2.2) / 3)
    loss.backward()
    # the two clipped terms pass no gradient; d/dlogp of -(2 * exp(logp)) / 3 at ratio 1.1
    assert logp.grad.tolist() == pytest.approx([0.0, 0.0, -2.0 * 1.1 / 3])


# ---------------------------------------------------------------------- the policies


def make(cls=APPOPolicy, meta=DISCRETE_META, **cfg):
    cfg.setdefault("hidden_sizes", [16])
    policy = cls(PolicyConfig(type=cls.algo_name, **cfg))
    policy.setup(meta, seed=0)
    return policy


def test_registered_with_their_configs():
    assert POLICIES.get("appo") is APPOPolicy and POLICIES.get("impala") is IMPALAPolicy
    assert POLICIES.config_of("appo") is APPOConfig and POLICIES.config_of("impala") is IMPALAConfig
    assert type(PolicyConfig(type="appo")) is APPOConfig and type(PolicyConfig(type="impala")) is IMPALAConfig
    with pytest.raises(ValueError, match="clip_coef"):
        PolicyConfig(type="impala", clip_coef=0.1)  # IMPALA has no clipped surrogate
    assert APPOPolicy.buffer_postprocess_fn(PolicyConfig(type="appo")) is None


def test_acting_stamps_the_weight_version():
    policy = make()
    policy.weight_version = 7
    out = policy.compute_actions(torch.randn(5, 4).numpy())
    assert out[POLICY_VERSION].tolist() == [7] * 5 and out["log_prob"].shape == (5,)


def sequences(e=3, t=5, n_obs=4, seed=0, continuous=False):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([5, 3, 1])[:e]
    mask = torch.arange(t)[None, :] < lengths[:, None]
    done = torch.zeros(e, t, dtype=torch.bool)
    done[torch.arange(e), lengths - 1] = True
    term = torch.zeros(e, t, dtype=torch.bool)
    term[1, 2] = True  # the second piece ends in a terminal state, the others are cut (truncated)
    action = torch.randn(e, t, 1, generator=g) if continuous else torch.randint(0, 2, (e, t), generator=g)
    return TensorDict(
        {
            "obs": torch.randn(e, t, n_obs, generator=g),
            "next_obs": torch.randn(e, t, n_obs, generator=g),
            "action": action,
            "log_prob": -torch.rand(e, t, generator=g) - 0.2,
            "reward": torch.randn(e, t, generator=g),
            "terminated": term,
            "done": done | ~mask,
            "mask": mask,
            POLICY_VERSION: torch.tensor([[3] * t, [4] * t, [5] * t])[:e],
        },
        batch_size=[e, t],
    )


@pytest.mark.parametrize("meta", [DISCRETE_META, CONTINUOUS_META], ids=["discrete", "continuous"])
def test_vtrace_targets_run_per_piece_and_ignore_padding(meta):
    policy = make(meta=meta, gamma=0.9, vtrace_rho_bar=1.0, vtrace_c_bar=1.0)
    td = sequences(n_obs=meta.observation_space.shape[0], continuous=meta is CONTINUOUS_META)
    policy.update_dataset(td)
    out = policy.vtrace_targets(policy.dataset)
    with torch.no_grad():
        want_vs, want_adv = [], []
        for i, length in enumerate(td["mask"].sum(-1).tolist()):
            piece = td[i, :length]
            x = policy.encoder(piece["obs"])
            act = piece["action"] if meta is DISCRETE_META else piece["action"].float()
            logp, _ = policy.log_prob_entropy(x, act)
            v = policy.critic(x).squeeze(-1)
            nv = policy.critic(policy.encoder(piece["next_obs"])).squeeze(-1)
            vs, adv = paper_vtrace(
                (logp - piece["log_prob"]).tolist(),
                piece["reward"].tolist(),
                v.tolist(),
                nv.tolist(),
                piece["terminated"].int().tolist(),
                piece["done"].tolist(),
                0.9,
                1.0,
                1.0,
            )
            want_vs += vs
            want_adv += adv
    assert out["vs"].tolist() == pytest.approx(want_vs, abs=1e-5)
    assert out["pg_adv"].tolist() == pytest.approx(want_adv, abs=1e-5)


@pytest.mark.parametrize("cls", [IMPALAPolicy, APPOPolicy])
def test_train_reports_losses_and_the_batch_lag(cls):
    policy = make(cls)
    policy.weight_version = 6
    policy.update_dataset(sequences())
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    m = policy.train()
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "rho_mean", "explained_variance"):
        assert math.isfinite(m[key]), (key, m)
    # rows acted by versions 3 (5 steps), 4 (3 steps), 5 (1 step); the learner holds 6
    assert m["batch_policy_lag"] == pytest.approx((5 * 3 + 3 * 2 + 1 * 1) / 9)
    assert m["batch_policy_lag_max"] == 3
    assert any(not torch.equal(before[k], v) for k, v in policy.state_dict().items())


def test_impala_value_loss_is_half_the_squared_vtrace_error():
    policy = make(IMPALAPolicy, ent_coef=0.0, vf_coef=1.0, update_epochs=1, num_minibatches=1)
    policy.update_dataset(sequences())
    targets = policy.vtrace_targets(policy.dataset)
    m = policy.train()
    assert m["value_loss"] == pytest.approx(0.5 * float(((targets["value"] - targets["vs"]) ** 2).mean()), rel=1e-5)


def test_update_dataset_needs_sequences():
    policy = make()
    flat = sequences().reshape(-1)
    with pytest.raises(ValueError, match=r"needs sequences \[episodes, steps\].*buffer.unit='episode'"):
        policy.update_dataset(flat)
    with pytest.raises(KeyError, match=r"missing keys \['log_prob'\]"):
        policy.update_dataset(sequences().exclude("log_prob"))
    with pytest.raises(TypeError, match="needs a TensorDict"):
        policy.update_dataset({"obs": 1})
