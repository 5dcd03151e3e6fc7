import pytest
import torch
from tensordict import TensorDict

from rlightning.policy.returns import discounted_returns, gae, gae_td, vtrace


def _episode():
    reward = torch.tensor([1.0, 2.0, 3.0])
    value = torch.tensor([0.5, 1.0, 1.5])
    next_value = torch.tensor([1.0, 1.5, 4.0])
    return reward, value, next_value


def test_gae_hand_computed_truncated_and_terminated():
    reward, value, next_value = _episode()
    g, lam = 0.5, 0.5
    # truncated at the end: bootstrap 4.0
    d2 = 3.0 + g * 4.0 - 1.5
    d1 = 2.0 + g * 1.5 - 1.0
    d0 = 1.0 + g * 1.0 - 0.5
    a2 = d2
    a1 = d1 + g * lam * a2
    a0 = d0 + g * lam * a1
    done = torch.tensor([False, False, True])
    adv, target = gae(reward, value, next_value, torch.zeros(3, dtype=torch.bool), done, g, lam)
    assert torch.allclose(adv, torch.tensor([a0, a1, a2]))
    assert torch.allclose(target, adv + value)
    # terminated: no bootstrap
    adv_t, _ = gae(reward, value, next_value, done, done, g, lam)
    assert torch.allclose(adv_t[2], torch.tensor(3.0 - 1.5))
    assert torch.allclose(adv_t[1], torch.tensor(d1 + g * lam * (3.0 - 1.5)))


def test_gae_done_cuts_the_recursion_and_batches_rows():
    reward = torch.ones(2, 4)
    value = torch.zeros(2, 4)
    next_value = torch.zeros(2, 4)
    done = torch.tensor([[False, True, False, False], [False, False, False, True]])
    adv, _ = gae(reward, value, next_value, done, done, 1.0, 1.0)
    assert adv.tolist() == [[2.0, 1.0, 2.0, 1.0], [4.0, 3.0, 2.0, 1.0]]
    one, _ = gae(reward[1], value[1], next_value[1], done[1], done[1], 1.0, 1.0)  # the 1-D fast path agrees
    assert one.tolist() == adv[1].tolist()


def test_gae_errors():
    reward, value, next_value = _episode()
    with pytest.raises(ValueError, match=r"gamma must be in \[0.0, 1.0\], got 1.5"):
        gae(reward, value, next_value, torch.zeros(3), torch.zeros(3), 1.5, 0.9)
    with pytest.raises(ValueError, match=r"value has shape \(2,\), expected \(3,\)"):
        gae(reward, value[:2], next_value, torch.zeros(3), torch.zeros(3))


def test_vtrace_on_policy_equals_gae_lambda_one_and_discounted_returns():
    torch.manual_seed(0)
    reward, value, next_value = torch.randn(3, 7), torch.randn(3, 7), torch.randn(3, 7)
    term = torch.rand(3, 7) < 0.2
    done = term | (torch.rand(3, 7) < 0.2)
    done[:, -1] = True
    next_value = torch.where(done, next_value, torch.nn.functional.pad(value[:, 1:], (0, 1)))
    vs, pg = vtrace(torch.zeros(3, 7), reward, value, next_value, term, done, gamma=0.9)
    adv, target = gae(reward, value, next_value, term, done, gamma=0.9, lmbda=1.0)
    assert torch.allclose(vs, target, atol=1e-5)
    assert torch.allclose(vs, discounted_returns(reward, next_value, term, done, 0.9), atol=1e-5)
    # on-policy, rho = 1: the pg advantage is the one-step TD error against the v-trace target
    assert torch.allclose(pg, adv, atol=1e-5)


def test_vtrace_clips_importance_weights():
    reward, value, next_value = _episode()
    done = torch.tensor([False, False, True])
    log_rho = torch.log(torch.tensor([4.0, 0.5, 2.0]))
    vs, _ = vtrace(log_rho, reward, value, next_value, torch.zeros(3), done, gamma=1.0, rho_bar=1.0, c_bar=1.0)
    # rho = (1, 0.5, 1), c = (1, 0.5, 1); delta_t = rho_t * (r + V' - V)
    d = [1.0 * (1.0 + 1.0 - 0.5), 0.5 * (2.0 + 1.5 - 1.0), 1.0 * (3.0 + 4.0 - 1.5)]
    v2 = 1.5 + d[2]
    v1 = 1.0 + d[1] + 0.5 * (v2 - 1.5)
    v0 = 0.5 + d[0] + 1.0 * (v1 - 1.0)
    assert torch.allclose(vs, torch.tensor([v0, v1, v2]))


def test_gae_td_on_a_record_chunk():
    td = TensorDict(
        {
            "value": torch.zeros(1, 3),
            "next": {
                "reward": torch.ones(1, 3),
                "terminated": torch.tensor([[False, False, True]]),
                "done": torch.tensor([[False, False, True]]),
            },
        },
        batch_size=[1, 3],
    )
    gae_td(td, gamma=1.0, lmbda=1.0)
    assert td["advantage"].tolist() == [[3.0, 2.0, 1.0]]
    with pytest.raises(KeyError, match=r"gae_td needs key 'value'"):
        gae_td(td.exclude("value"))


@pytest.mark.parametrize("n", [1, 1024, 1025, 8192, 40_000])
def test_one_long_sequence_in_blocks_is_the_step_by_step_recursion(n):
    """A storage's episodes end to end form one long sequence; it is solved in blocks (exactly the recursion)."""
    g = torch.Generator().manual_seed(n)
    reward, value, next_value = (torch.randn(n, generator=g, dtype=torch.float64) for _ in range(3))
    done = torch.rand(n, generator=g) < 0.01  # episodes of about 100 steps, the last one cut at the end
    done[-1] = True
    terminated = done & (torch.rand(n, generator=g) < 0.5)
    adv, target = gae(reward, value, next_value, terminated, done, gamma=0.99, lmbda=0.95)
    want, acc = [0.0] * n, 0.0
    for t in range(n - 1, -1, -1):
        delta = reward[t] + 0.99 * next_value[t] * (1.0 - float(terminated[t])) - value[t]
        acc = float(delta) + 0.99 * 0.95 * (1.0 - float(done[t])) * acc
        want[t] = acc
    torch.testing.assert_close(adv, torch.tensor(want, dtype=torch.float32))
    torch.testing.assert_close(target, (torch.tensor(want, dtype=torch.float64) + value).float())
    # no episode end at all: the discount carries through every block
    adv2, _ = gae(reward, value, next_value, torch.zeros(n), torch.zeros(n), gamma=1.0, lmbda=1.0)
    torch.testing.assert_close(adv2, (reward + next_value - value).flip(0).cumsum(0).flip(0).float())
