"""`ActingNet`: a policy's deterministic acting as one ``nn.Module`` of tensors (what `predict` runs and export writes).

Usage::

    net = ActingNet(policy, masked=False)          # the policy's own encoder, core and heads; no copies
    action = net(obs)                              # [B, *obs_shape] -> env actions [B, ...]
    action, h, c = net(obs, h, c)                  # a recurrent (LSTM) policy: the state before -> after

Its inputs are plain tensors in a fixed order (`input_names`): the observation (one tensor per key of a
Dict space, in the space's key order), then ``action_mask`` (``masked=True``, discrete action spaces:
bool, True = allowed), then the recurrent state. A Dict observation's own ``action_mask`` key (the env's
mask, `rlightning.policy.networks.masks`) applies too, as in the policy's acting; with both, an action must
be allowed by both. The outputs are the action in the env's format (a
``Discrete`` offset by its ``start``, a ``MultiDiscrete`` per entry, a ``Box`` clipped to its bounds as
the policy's acting clips it) and, for a recurrent policy, the state after the step.

The algorithms it knows (`acting_family`): the actor-critic ones (``ppo``, ``a2c``, ``impala``, ``appo``:
the mode of the action head), ``dqn`` (greedy in Q), ``sac`` (the squashed mean) and ``td3`` (the actor).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from rlightning.policy.networks.masks import ACTION_MASK, action_mask, mask_logits, mask_q

__all__ = ["ACTING_FAMILIES", "ActingNet", "acting_family"]

#: Acting families by the policy classes they cover (checked in this order, subclasses included).
ACTING_FAMILIES = ("actor_critic", "q", "squashed", "deterministic")


def acting_family(policy: Any) -> str:
    """How ``policy`` acts deterministically: one of `ACTING_FAMILIES` (its ``acting_family`` attribute when it
    declares one; otherwise by its class).

    Raises:
        ValueError: a policy class none of them covers (the supported ``policy.type`` names listed).
    """
    declared = getattr(policy, "acting_family", None)  # a policy may say which family it acts as (BC, IQL)
    if declared in ACTING_FAMILIES:
        return declared
    from rlightning.policy.algorithms.dqn import DQNPolicy
    from rlightning.policy.algorithms.ppo import PPOPolicy
    from rlightning.policy.algorithms.sac import SACPolicy
    from rlightning.policy.algorithms.td3 import TD3Policy

    for cls, family in ((PPOPolicy, "actor_critic"), (DQNPolicy, "q"), (SACPolicy, "squashed"), (TD3Policy, "td3")):
        if isinstance(policy, cls):
            return family if family != "td3" else "deterministic"
    raise ValueError(
        f"policy class {type(policy).__name__} has no standalone acting; supported policy.type: "
        "ppo, a2c, impala, appo, dqn, sac, td3"
    )


def _obs_keys(space: Any) -> Optional[List[str]]:
    if isinstance(space, spaces.Dict):
        return [str(k) for k in space.spaces]
    if isinstance(space, spaces.Tuple):
        raise ValueError(
            f"a standalone policy takes Box, Discrete, MultiDiscrete, MultiBinary or Dict observations, not {space!r}"
        )
    return None


class ActingNet(nn.Module):
    """The deterministic action of ``policy`` for a batch, from the policy's own modules (not copied).

    Args:
        policy: A built `BasePolicy` of one of the `ACTING_FAMILIES`.
        masked: Take an ``action_mask`` input (``Discrete`` and ``MultiDiscrete`` action spaces).

    Raises:
        ValueError: an unsupported policy class or observation space, or a mask for actions it cannot mask.
    """

    def __init__(self, policy: Any, masked: bool = False) -> None:
        super().__init__()
        self.family = acting_family(policy)
        meta = policy.env_meta
        self.obs_keys = _obs_keys(meta.observation_space)
        self.encoder = policy.encoder
        self.core = getattr(policy, "core", None)
        self.state_keys: Tuple[str, ...] = tuple(self.core.state_keys) if self.core is not None else ()
        self.actor = getattr(policy, "actor", None)
        self.q = getattr(policy, "q", None)
        act_space = meta.action_space
        self.kind = "continuous" if isinstance(act_space, spaces.Box) else type(act_space).__name__
        head = getattr(policy, "head", None)
        if head is not None:
            self.kind = head.kind
        elif isinstance(act_space, spaces.Discrete):
            self.kind = "discrete"
        self.obs_masked = self.obs_keys is not None and ACTION_MASK in self.obs_keys
        if (masked or self.obs_masked) and self.kind not in ("discrete", "multi_discrete"):
            raise ValueError(
                "action_mask masks discrete actions (Discrete, MultiDiscrete); this policy's action space is "
                f"{act_space}"
            )
        self.masked = bool(masked)
        self.nvec: Tuple[int, ...] = tuple(getattr(head, "nvec", ()) or ())
        self.shape = tuple(int(s) for s in getattr(act_space, "shape", ()) or ())
        start = np.asarray(getattr(act_space, "start", 0), dtype=np.int64).reshape(-1)
        self.register_buffer("start", torch.as_tensor(start), persistent=False)
        if isinstance(act_space, spaces.Box):
            self.register_buffer("low", torch.as_tensor(act_space.low, dtype=torch.float32), persistent=False)
            self.register_buffer("high", torch.as_tensor(act_space.high, dtype=torch.float32), persistent=False)

    @property
    def input_names(self) -> List[str]:
        """Names of the inputs in order: ``obs`` (or ``obs.<key>`` per Dict key), ``action_mask``, state keys."""
        names = ["obs"] if self.obs_keys is None else [f"obs.{k}" for k in self.obs_keys]
        if self.masked:
            names.append("action_mask")
        return names + list(self.state_keys)

    @property
    def output_names(self) -> List[str]:
        """Names of the outputs: ``action``, then the state after the step (``<state key>_next``)."""
        return ["action"] + [f"{k}_next" for k in self.state_keys]

    def split_inputs(self, inputs: Tuple[torch.Tensor, ...]) -> Tuple[Any, Optional[torch.Tensor], Dict[str, Any]]:
        """The flat inputs as (observation batch, mask or None, state dict); the mask includes the observation's."""
        want = len(self.input_names)
        if len(inputs) != want:
            raise ValueError(f"ActingNet takes {want} inputs ({', '.join(self.input_names)}), got {len(inputs)}")
        n_obs = 1 if self.obs_keys is None else len(self.obs_keys)
        obs: Any = inputs[0] if self.obs_keys is None else dict(zip(self.obs_keys, inputs[:n_obs]))
        mask = inputs[n_obs].to(torch.bool) if self.masked else None
        if self.obs_masked:
            own = action_mask(obs)
            mask = own if mask is None else mask & own
        state = dict(zip(self.state_keys, inputs[n_obs + int(self.masked) :]))
        return obs, mask, state

    def features(self, obs: Any, state: Dict[str, torch.Tensor]) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
        """Encoder (and recurrent core) features of the actor, and the state after the step (empty without a core)."""
        x = self.encoder(obs)
        if self.core is None:
            return x, {}
        y, new_state = self.core.step(x, state)
        return (y[0] if isinstance(y, tuple) else y), new_state

    def scores(self, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        """Logits (actor-critic) or Q-values (``dqn``) of discrete actions at features ``x``, under ``mask`` as the
        policy masks them (`mask_logits`, `mask_q`: a row that allows nothing stays unmasked)."""
        if self.family == "q":
            return mask_q(self.q(x), mask)
        return mask_logits(self.actor(x), mask)

    def decide(self, x: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
        """The deterministic env action at features ``x``."""
        if self.family == "squashed":
            return self.actor(x, True)[0]
        if self.family == "deterministic":
            return torch.minimum(torch.maximum(self.actor(x), self.low), self.high)
        if self.kind == "continuous":  # a GaussianActor: its mean, clipped as the head's to_env clips
            return torch.minimum(torch.maximum(self.actor.mean(x), self.low), self.high)
        scores = self.scores(x, mask)
        if self.kind == "discrete":
            return scores.argmax(-1) + self.start[0]
        if self.kind == "multi_discrete":
            picks = [part.argmax(-1) for part in torch.split(scores, list(self.nvec), dim=-1)]
            return (torch.stack(picks, dim=-1) + self.start).reshape((-1, *self.shape))
        return (scores > 0).to(torch.int8).reshape((-1, *self.shape))  # multi_binary: each bit's mode

    def forward(self, *inputs: torch.Tensor) -> Any:
        obs, mask, state = self.split_inputs(inputs)
        x, new_state = self.features(obs, state)
        action = self.decide(x, mask)
        if not self.state_keys:
            return action
        return (action, *(new_state[k] for k in self.state_keys))
