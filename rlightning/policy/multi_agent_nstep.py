"""N-step returns per agent: DQN's ``n_step`` on stored multi-agent episodes.

Each agent gets `NStepReturns` over its own part of every env episode: the horizon of step ``t``
stops at the agent's own ``terminated`` or ``truncated`` step (or where the env's episode ends),
so an agent that finished early bootstraps (or not) from its own last step, never from steps
it took no part in. Writes ``agents.<id>.nstep_reward``, ``agents.<id>.nstep_next_obs`` and
``agents.<id>.nstep_discount``, which `rlightning.types.multi_agent_record.agent_group_batch`
hands to the group's learner under the single-agent names.
"""

from __future__ import annotations

from typing import Any, Optional

import torch

from rlightning.policy.algorithms.nstep import NStepReturns

__all__ = ["MultiAgentNStep"]


class MultiAgentNStep:
    """A picklable buffer post-process: `NStepReturns` for every agent of stored multi-agent episodes.

    Args:
        n: Horizon (>= 1).
        gamma: Discount in [0, 1].

    Raises:
        ValueError: ``n`` below 1 or ``gamma`` outside [0, 1] (from `NStepReturns`).
    """

    def __init__(self, n: int, gamma: float) -> None:
        self.single = NStepReturns(n, gamma)

    def __repr__(self) -> str:
        return f"MultiAgentNStep(n={self.single.n}, gamma={self.single.gamma})"

    def batched(self, episodes: Any, lengths: Any, bootstrap_value: Optional[Any] = None) -> Any:
        """Episodes concatenated along the batch dim (``lengths`` each) -> with each agent's n-step keys.

        Raises:
            KeyError: no agents in the data, or an agent without ``next_agents.<id>.reward``, ``.obs`` or
                ``.terminated`` (naming the keys present).
        """
        from tensordict import TensorDict

        from rlightning.types.multi_agent_record import stored_agent_ids

        agents = stored_agent_ids(episodes)
        if not agents:
            raise KeyError(
                f"MultiAgentNStep needs multi-agent data (agents.<id>.valid keys); got {sorted(episodes.keys())}"
            )
        total = int(episodes.batch_size[0])
        lengths = torch.as_tensor(lengths, dtype=torch.int64).reshape(-1)
        env_end = torch.zeros(total, dtype=torch.bool)
        env_end[torch.cumsum(lengths, 0) - 1] = True
        keys = set(episodes.keys())
        for a in agents:
            names = {k: f"next_agents.{a}.{k}" for k in ("reward", "obs", "terminated")}
            missing = [v for v in names.values() if v not in keys]
            if missing:
                raise KeyError(f"MultiAgentNStep: agent {a!r} lacks {missing}; the data has {sorted(keys)}")
            term = episodes.get(names["terminated"]).reshape(total).bool()
            trunc_key = f"next_agents.{a}.truncated"
            trunc = episodes.get(trunc_key).reshape(total).bool() if trunc_key in keys else torch.zeros_like(term)
            # the agent's own episodes: cut where it finished and where the env's episode ended
            cut = (term | trunc | env_end).nonzero().reshape(-1)
            own = torch.diff(cut + 1, prepend=torch.zeros(1, dtype=torch.int64))
            view = TensorDict(
                {
                    "reward": episodes.get(names["reward"]),
                    "next_obs": episodes.get(names["obs"]),
                    "terminated": episodes.get(names["terminated"]),
                },
                batch_size=[total],
            )
            out = self.single.batched(view, own)
            for key in ("nstep_reward", "nstep_next_obs", "nstep_discount"):
                episodes.set(f"agents.{a}.{key}", out.get(key))
        return episodes

    def __call__(self, episode: Any, bootstrap_value: Optional[Any] = None) -> Any:
        """One episode (see `batched`)."""
        return self.batched(episode, torch.tensor([episode.batch_size[0]]), bootstrap_value)
