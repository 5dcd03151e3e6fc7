"""N-step returns as a buffer post-process over finished episodes (DQN's ``n_step``).

For each stored transition ``t`` of an episode of length ``T`` with ``m = min(n, T - t)``:

    nstep_reward[t]   = sum_{k < m} gamma^k * reward[t + k]
    nstep_next_obs[t] = next_obs[t + m - 1]
    nstep_discount[t] = gamma^m * (1 - terminated[t + m - 1])

so the learner's target is ``nstep_reward + nstep_discount * max_a Q'(nstep_next_obs, a)``: an episode
that terminated inside the horizon does not bootstrap, one that was truncated bootstraps from its last
observation with the discount of the steps actually taken. The one-step keys stay as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import torch

if TYPE_CHECKING:  # only annotations: env workers acting with a policy copy import this module, never tensordict
    from tensordict import TensorDict

__all__ = ["NSTEP_KEYS", "NStepReturns"]

#: Keys the post-process adds to every stored transition.
NSTEP_KEYS = ("nstep_reward", "nstep_next_obs", "nstep_discount")


class NStepReturns:
    """A picklable buffer post-process adding `NSTEP_KEYS` to finished episodes.

    Args:
        n: Horizon (>= 1).
        gamma: Discount in [0, 1].

    Raises:
        ValueError: ``n`` below 1 or ``gamma`` outside [0, 1].
    """

    def __init__(self, n: int, gamma: float) -> None:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"NStepReturns(n={n!r}) needs an int >= 1")
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"NStepReturns(gamma={gamma!r}) needs gamma in [0, 1]")
        self.n, self.gamma = n, float(gamma)

    def __call__(self, episode: TensorDict, bootstrap_value: Optional[Any] = None) -> TensorDict:
        """One episode ``[T]`` -> the same episode with the n-step keys."""
        length = int(episode.batch_size[0])
        return self.batched(episode, torch.tensor([length]), None)

    def batched(self, episodes: TensorDict, lengths: torch.Tensor, bootstrap_value: Optional[Any] = None) -> TensorDict:
        """Episodes concatenated along the batch dim (``lengths`` each) -> with the n-step keys.

        Raises:
            KeyError: ``reward``, ``next_obs`` or ``terminated`` is missing.
        """
        keys = set(episodes.keys())
        missing = [k for k in ("reward", "next_obs", "terminated") if k not in keys]
        if missing:
            raise KeyError(f"n-step returns need keys {missing} in the stored episodes; they have {sorted(keys)}")
        reward = episodes.get("reward").reshape(-1).to(torch.float64)
        total = reward.shape[0]
        lengths = torch.as_tensor(lengths, dtype=torch.int64).reshape(-1)
        if int(lengths.sum()) != total:
            raise ValueError(f"n-step returns: lengths sum to {int(lengths.sum())}, the episodes hold {total} rows")
        ends = torch.repeat_interleave(torch.cumsum(lengths, 0), lengths)  # exclusive end of each row's episode
        t = torch.arange(total)
        m = torch.clamp(ends - t, max=self.n)  # steps inside the horizon, >= 1
        out = torch.zeros(total, dtype=torch.float64)
        for k in range(self.n):
            inside = k < m
            out += torch.where(inside, reward[torch.clamp(t + k, max=total - 1)], 0.0) * self.gamma**k
        last = t + m - 1
        terminated = episodes.get("terminated").reshape(-1)[last].to(torch.float64)
        discount = torch.pow(torch.full_like(out, self.gamma), m.to(torch.float64)) * (1.0 - terminated)
        device = episodes.get("reward").device
        episodes.set("nstep_reward", out.to(torch.float32).to(device))
        episodes.set("nstep_next_obs", episodes.get("next_obs")[last.to(device)])
        episodes.set("nstep_discount", discount.to(torch.float32).to(device))
        return episodes

    def __repr__(self) -> str:
        return f"NStepReturns(n={self.n}, gamma={self.gamma})"
