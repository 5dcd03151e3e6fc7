"""`categorical_draw`: the Gumbel-max draw PPO acts with on discrete actions."""

import math

import torch

from rlightning.policy.algorithms.networks import categorical_draw


def test_draws_follow_the_probabilities():
    probs = torch.tensor([0.1, 0.6, 0.3])
    logp = probs.log().expand(200_000, 3)
    torch.manual_seed(0)
    counts = torch.bincount(categorical_draw(logp), minlength=3).double()
    expected = probs.double() * logp.shape[0]
    # Within 5 standard deviations of the binomial count for each action.
    assert torch.all((counts - expected).abs() < 5 * (expected * (1 - probs.double())).sqrt())


def test_zero_probability_actions_are_never_drawn_and_shape_is_kept():
    logp = torch.log_softmax(torch.tensor([[0.0, -math.inf, 1.0, -math.inf]]), -1).expand(2, 50_000, 4)
    torch.manual_seed(1)
    draws = categorical_draw(logp)
    assert draws.shape == (2, 50_000) and draws.dtype == torch.int64
    assert set(draws.unique().tolist()) == {0, 2}


def test_a_certain_action_is_always_drawn():
    logp = torch.log_softmax(torch.tensor([[-1e4, 0.0, -1e4]]), -1).expand(1000, 3)
    assert torch.equal(categorical_draw(logp), torch.ones(1000, dtype=torch.int64))
