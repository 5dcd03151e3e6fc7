"""Deterministic vectorised env and policy stand-ins for the buffer tests.

Observations encode where they come from, so a stored transition can be
checked exactly: ``obs[i] = [row, episode, step_in_episode, env_step, tag]``.
Row ``i`` ends its episode after ``lengths[i]`` steps (terminated, or
truncated when ``truncate_rows`` says so), with gymnasium's NEXT_STEP
autoreset: the EnvRet with the done flag carries the final observation; the
next one carries the reset observation with reward 0.
The reward for reaching ``step_in_episode = s`` is ``s + 10 * row``.
"""

from __future__ import annotations

from typing import Optional, Sequence

import gymnasium as gym
import numpy as np

from rlightning.types import EnvMeta, EnvRet, PolicyResponse


def reward_for(row: int, step: int) -> float:
    """The reward a FakeVecEnv gives row ``row`` for reaching ``step``."""
    return float(step + 10 * row)


class FakeVecEnv:
    """A vectorised env whose observations say which row, episode and step they are."""

    def __init__(
        self,
        env_id: str = "Fake-0",
        num_envs: int = 2,
        lengths: Optional[Sequence[int]] = None,
        truncate_rows: Sequence[int] = (),
        tag: int = 0,
    ) -> None:
        self.env_id = env_id
        self.tag = tag
        self.num_envs = num_envs
        self.lengths = np.asarray(lengths if lengths is not None else [3 + i for i in range(num_envs)])
        self.truncate_rows = set(truncate_rows)
        self.episode = np.zeros(num_envs, dtype=np.int64)
        self.step_in_ep = np.zeros(num_envs, dtype=np.int64)
        self.done = np.zeros(num_envs, dtype=bool)
        self.ret = np.zeros(num_envs)
        self.t = 0

    @property
    def meta(self) -> EnvMeta:
        return EnvMeta(
            env_id=self.env_id,
            action_space=gym.spaces.Discrete(2),
            observation_space=gym.spaces.Box(-1e9, 1e9, (5,), np.float32),
            num_envs=self.num_envs,
        )

    def _obs(self) -> np.ndarray:
        rows = np.arange(self.num_envs)
        t = np.full(self.num_envs, self.t)
        tag = np.full(self.num_envs, self.tag)
        return np.stack([rows, self.episode, self.step_in_ep, t, tag], 1).astype(np.float32)

    def reset(self) -> EnvRet:
        return EnvRet(
            env_id=self.env_id,
            observation=self._obs(),
            last_reward=np.zeros(self.num_envs, np.float32),
            last_terminated=np.zeros(self.num_envs, bool),
            last_truncated=np.zeros(self.num_envs, bool),
            info={"episode_return": self.ret.copy(), "episode_length": self.step_in_ep.copy()},
        )

    def step(self, action: Optional[np.ndarray] = None) -> EnvRet:
        self.t += 1
        reward = np.zeros(self.num_envs, np.float32)
        term = np.zeros(self.num_envs, bool)
        trunc = np.zeros(self.num_envs, bool)
        for i in range(self.num_envs):
            if self.done[i]:
                self.episode[i] += 1
                self.step_in_ep[i] = 0
                self.ret[i] = 0.0
                self.done[i] = False
                continue
            self.step_in_ep[i] += 1
            reward[i] = reward_for(i, int(self.step_in_ep[i]))
            self.ret[i] += reward[i]
            if self.step_in_ep[i] >= self.lengths[i]:
                self.done[i] = True
                if i in self.truncate_rows:
                    trunc[i] = True
                else:
                    term[i] = True
        return EnvRet(
            env_id=self.env_id,
            observation=self._obs(),
            last_reward=reward,
            last_terminated=term,
            last_truncated=trunc,
            info={"episode_return": self.ret.copy(), "episode_length": self.step_in_ep.copy()},
        )


def respond(env_ret: EnvRet, with_value: bool = True) -> PolicyResponse:
    """A PolicyResponse whose action and value are functions of the observation."""
    obs = np.asarray(env_ret.observation)
    data = {
        "action": (obs[:, 3].astype(np.int64) % 2),
        "log_prob": np.full(obs.shape[0], -0.5, np.float32),
    }
    if with_value:
        data["value"] = (obs[:, 2] + 100 * obs[:, 0]).astype(np.float32)
    resp = PolicyResponse(env_id=env_ret.env_id, weight_version=0, ts_env_sent_ns=env_ret.ts_env_sent_ns, **data)
    return resp.mark_policy_sent()


def rollout(storage, env: FakeVecEnv, steps: int, with_value: bool = True, env_ret: Optional[EnvRet] = None):
    """Run ``steps`` env steps into ``storage.add_transition``; return the last EnvRet (not yet added)."""
    env_ret = env.reset() if env_ret is None else env_ret
    for _ in range(steps):
        resp = respond(env_ret, with_value)
        storage.add_transition(env_ret, resp)
        env_ret = env.step(resp.action)
    return env_ret


def check_transitions(td, lengths: Sequence[int], truncate_rows: Sequence[int] = ()) -> int:
    """Assert every transition in ``td`` is exactly what a FakeVecEnv produced; return how many were manual truncations.

    A transition may also be truncated by hand (``truncate_episodes``): then it is the last
    of its episode, truncated and not terminated.
    """
    obs = td["obs"].numpy()
    nxt = td["next_obs"].numpy()
    manual = 0
    for k in range(obs.shape[0]):
        row, ep, s, t, tag = (int(x) for x in obs[k])
        assert list(nxt[k]) == [row, ep, s + 1, t + 1, tag], (k, obs[k], nxt[k])
        assert int(td["action"][k]) == t % 2
        assert float(td["reward"][k]) == reward_for(row, s + 1)
        natural_end = s + 1 == lengths[row]
        assert bool(td["terminated"][k]) == (natural_end and row not in truncate_rows)
        trunc = bool(td["truncated"][k])
        if natural_end and row in truncate_rows:
            assert trunc
        elif trunc:
            manual += 1
        assert bool(td["done"][k]) == (bool(td["terminated"][k]) or trunc)
        if "value" in td.keys():
            assert float(td["value"][k]) == s + 100 * row
    return manual


class RecordBuffer:
    """A buffer that keeps the records it is given (what `DataBuffer.add_rollout` receives), for a collector
    alone; ``truncated`` lists each `truncate_episodes` call's env ids, sorted."""

    def __init__(self) -> None:
        self.records: list = []
        self.truncated: list = []

    def add_rollout(self, td) -> None:
        self.records.append(td)

    def add_rollouts(self, tds) -> None:
        self.records.extend(tds)

    def truncate_episodes(self, env_ids=None) -> None:
        self.truncated.append(sorted(env_ids or []))
