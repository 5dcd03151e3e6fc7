"""`RendezvousEnv` (``ENVS["rendezvous"]``): a small cooperative multi-agent env for tests and tutorials.

``num_agents`` agents stand on a line of ``size`` cells and must all meet on
one cell. Each step every agent moves left, stays or moves right
(``Discrete(3)``: 0, 1, 2). The team gets 1.0 each when they meet (the episode
terminates) and -0.05 each per step otherwise; episodes are truncated after
``max_episode_steps`` (default 32). Agent ``i`` observes the positions of all
agents scaled to [0, 1], its own first.

Vectorised like every env worker: ``observation[agent]`` is
``[num_envs, num_agents]``, ``last_reward[agent]`` float32 ``[num_envs]``, and
the done flags are bool ``[num_envs]`` per agent; ``info["episode_return"]``
is the team's running return (summed over agents), ``info["episode_length"]``
the steps, ``info["agent_episode_return"][agent]`` each agent's own. Sub-environments autoreset NEXT_STEP. It takes a
`MultiAgentPolicyResponse` whose ``action`` is a dict of agent id ->
``[num_envs]`` ints. Use it with ``EnvConfig(name="rendezvous", env_kwargs={"num_agents": 3})``.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

import numpy as np
from gymnasium import spaces

from rlightning.env.base_env import BaseEnv
from rlightning.env.errors import caller_error
from rlightning.env.utils.spaces import make_action_check
from rlightning.env.utils.utils import default_env_preprocess_fn
from rlightning.types import EnvMeta, MultiAgentEnvRet, PolicyResponse
from rlightning.utils.config import EnvConfig
from rlightning.utils.registry import ENVS

_KWARGS = {"num_agents": 2, "size": 8}
_MEET_REWARD = 1.0
_STEP_REWARD = -0.05


def agent_actions(env: BaseEnv, policy_resp: PolicyResponse, needs_reset: bool) -> Dict[Any, Any]:
    """The preprocessed actions of ``policy_resp`` for a multi-agent ``env``: a dict of agent id -> actions.

    ``needs_reset``: the env has not been reset since it was built or closed (a step is an error).

    Raises:
        ValueError: a step before ``reset()``, or actions that are not a dict.
    """
    env.check_policy_resp(policy_resp)
    if needs_reset:
        raise ValueError(f"env {env.env_id}: step() before reset(); call reset() first")
    action = env.preprocess_fn(policy_resp)
    if not isinstance(action, dict):
        raise ValueError(
            f"env {env.env_id}: a multi-agent env takes a dict of agent id -> actions (a "
            f"MultiAgentPolicyResponse), got {type(action).__name__}"
        )
    return action


@ENVS.register("rendezvous")
class RendezvousEnv(BaseEnv):
    """Agents on a line who must meet on one cell (see the module docstring).

    ``env_kwargs``: ``num_agents`` (int >= 2, default 2), ``size`` (int >= 2, default 8).

    Raises:
        ValueError: an unknown or invalid ``env_kwargs`` entry.
    """

    multi_agent = True
    """Observations, rewards and flags are dicts keyed by agent id (the engines build a `MultiAgentPolicy`)."""

    def __init__(
        self,
        config: EnvConfig,
        worker_index: int = 0,
        preprocess_fn: Optional[Callable[[PolicyResponse], Any]] = default_env_preprocess_fn,
    ) -> None:
        super().__init__(config, worker_index=worker_index, preprocess_fn=preprocess_fn)
        kwargs = dict(_KWARGS)
        for key, value in config.env_kwargs.items():
            if key not in _KWARGS:
                raise ValueError(
                    f"env {self.env_id}: unknown env_kwargs key {key!r} for rendezvous; valid keys: "
                    f"{', '.join(_KWARGS)}"
                )
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ValueError(f"env {self.env_id}: env_kwargs[{key!r}] must be an int >= 2, got {value!r}")
            kwargs[key] = value
        self.num_agents = kwargs["num_agents"]
        self.size = kwargs["size"]
        self.max_episode_steps = config.max_episode_steps or 32
        self.agent_ids = tuple(f"agent_{i}" for i in range(self.num_agents))
        self.single_action_space = spaces.Discrete(3)
        self.single_observation_space = spaces.Box(0.0, 1.0, (self.num_agents,), dtype=np.float32)
        self._checks = {
            agent: make_action_check(self.single_action_space, self.num_envs, f"{self.env_id} agent {agent}")
            for agent in self.agent_ids
        }
        # Agent i sees itself first, then the others in order.
        self._views = [[i] + [j for j in range(self.num_agents) if j != i] for i in range(self.num_agents)]
        self._rng = np.random.default_rng()
        self._pos = np.zeros((self.num_envs, self.num_agents), dtype=np.int64)
        self._t = np.zeros(self.num_envs, dtype=np.int64)
        self._prev_done: Optional[np.ndarray] = None
        self._needs_reset = True

    def _sample_positions(self, rows: int) -> np.ndarray:
        pos = self._rng.integers(0, self.size, size=(rows, self.num_agents))
        together = (pos == pos[:, :1]).all(axis=1)
        pos[together, 0] = (pos[together, 0] + 1) % self.size
        return pos

    def _observe(self) -> Dict[str, np.ndarray]:
        scaled = (self._pos / (self.size - 1)).astype(np.float32)
        return {agent: scaled[:, view] for agent, view in zip(self.agent_ids, self._views)}

    def _per_agent(self, value: np.ndarray) -> Dict[str, np.ndarray]:
        return {agent: value.copy() for agent in self.agent_ids}

    def reset(self, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None) -> MultiAgentEnvRet:
        """Place the agents at random (an RNG seeded with ``seed``), apart."""
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0):
            raise caller_error(ValueError(f"env {self.env_id}: seed must be None or an int >= 0, got {seed!r}"))
        if seed is not None:
            self._rng = np.random.default_rng(int(seed))
        self._pos = self._sample_positions(self.num_envs)
        self._t[:] = 0
        self._prev_done = None
        self._needs_reset = False
        ep_return, ep_length = self.episodes.reset()
        zeros = np.zeros(self.num_envs, dtype=bool)
        return MultiAgentEnvRet(
            env_id=self.env_id,
            observation=self._observe(),
            last_reward=self._per_agent(np.zeros(self.num_envs, dtype=np.float32)),
            last_terminated=self._per_agent(zeros),
            last_truncated=self._per_agent(zeros),
            info=self._info(ep_return, ep_length),
        )

    def _moves(self, policy_resp: PolicyResponse) -> np.ndarray:
        """The checked per-agent moves (-1, 0, +1) of ``policy_resp``."""
        action = agent_actions(self, policy_resp, self._needs_reset)
        missing = [a for a in self.agent_ids if a not in action]
        if missing:
            raise ValueError(f"env {self.env_id}: no action for agent(s) {missing}; agents are {list(self.agent_ids)}")
        return np.stack([self._checks[a](action[a]) for a in self.agent_ids], axis=1) - 1

    def step(self, policy_resp: PolicyResponse) -> MultiAgentEnvRet:
        """Move every agent of every sub-env; rows done on the last step are reset instead.

        Raises:
            ValueError: an agent's action is missing or outside ``Discrete(3)`` (env, agent, value, space named).
        """
        try:  # every input check here is the caller's (marked: raised at once, never a restart)
            moves = self._moves(policy_resp)
        except Exception as err:  # noqa: BLE001
            caller_error(err)
            raise
        self._pos = np.clip(self._pos + moves, 0, self.size - 1)
        self._t += 1
        terminated = (self._pos == self._pos[:, :1]).all(axis=1)
        truncated = (self._t >= self.max_episode_steps) & ~terminated
        reward = np.where(terminated, _MEET_REWARD, _STEP_REWARD).astype(np.float32)
        prev = self._prev_done
        if prev is not None:
            self._pos[prev] = self._sample_positions(int(prev.sum()))
            self._t[prev] = 0
            reward[prev] = 0.0
            terminated[prev] = False
            truncated[prev] = False
        done = terminated | truncated
        self._prev_done = done if done.any() else None
        ep_return, ep_length = self.episodes.update(reward * self.num_agents, done)
        return MultiAgentEnvRet(
            env_id=self.env_id,
            observation=self._observe(),
            last_reward=self._per_agent(reward),
            last_terminated=self._per_agent(terminated),
            last_truncated=self._per_agent(truncated),
            info=self._info(ep_return, ep_length),
        )

    def _info(self, ep_return: np.ndarray, ep_length: np.ndarray) -> Dict[str, Any]:
        # Every agent gets the team's reward per agent: its own return is the team's divided by the agents.
        own = ep_return / self.num_agents
        return {
            "episode_return": ep_return,
            "episode_length": ep_length,
            "agent_episode_return": {agent: own.copy() for agent in self.agent_ids},
        }

    def get_metadata(self) -> EnvMeta:
        """Dict spaces keyed by agent id (the spaces of one sub-environment)."""
        return EnvMeta(
            env_id=self.env_id,
            action_space=spaces.Dict({a: self.single_action_space for a in self.agent_ids}),
            observation_space=spaces.Dict({a: self.single_observation_space for a in self.agent_ids}),
            num_envs=self.num_envs,
        )
