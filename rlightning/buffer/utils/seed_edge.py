"""`SeedEdge`: the seed API's per-step inputs turned into records for the `StorageWriter`.

`Storage.add_transition(env_ret_t, policy_resp_t)` runs the transition
pipeline (``preprocess_fn`` and the preprocessors, once per observation) and
the step checks, then pairs the step with the env's previous one: the pair
(step ``t - 1``, step ``t``) is the ``[N]`` record of step ``t - 1`` (the
record `rlightning.types.record.record_leaves` builds), with ``next.value``
from the response to ``t`` (the bootstrap of an episode that ends there). The
writer stores it as a one-column chunk of the env's open episodes
(`StorageWriter.write_step`). The newest step waits for the env's next EnvRet.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional

import numpy as np
import torch

from rlightning.buffer.utils.episode_input import AsyncPairer
from rlightning.buffer.utils.preprocessors import to_numpy
from rlightning.buffer.utils.step_checks import StepChecker
from rlightning.buffer.utils.storage_writer import StorageWriter
from rlightning.types import EnvRet

__all__ = ["SeedEdge"]


@dataclass
class _Pending:
    """The newest step of one env (waiting for the next EnvRet) and its row count."""

    step: Dict[str, np.ndarray]
    num_envs: int


def _stateful(p: Any) -> bool:
    return callable(getattr(p, "state_dict", None)) and callable(getattr(p, "load_state_dict", None))


class SeedEdge:
    """Per-step pairs, async halves: pipeline, checks, pairing into records.

    Args:
        writer: Where records go.
        checks: The storage's step checks.
        pipeline: ``preprocess_fn`` and its keyword arguments (preprocessors, per-half functions).
        close_on_done: ``auto_truncate_episode``.
    """

    def __init__(self, writer: StorageWriter, checks: StepChecker, pipeline: Dict[str, Any], close_on_done: bool):
        self.writer = writer
        self.checks = checks
        self.preprocess_fn: Callable = pipeline.pop("preprocess_fn")
        self.pipeline = pipeline
        self.close_on_done = close_on_done
        self.pending: Dict[str, _Pending] = {}
        self.seen: set = set()
        self.pairer = AsyncPairer()

    def env_ids(self) -> List[str]:
        """Envs that added steps or have unpaired async items."""
        return sorted(self.seen | self.pairer.env_ids())

    def pending_rows(self) -> int:
        """Rows of pending steps that belong to an episode in progress."""
        total = 0
        for p in self.pending.values():
            total += int((~(p.step["terminated"] | p.step["truncated"])).sum())
        return total

    def drop_pending(self, env_ids: List[str]) -> None:
        """Forget the newest step of these envs (after a truncation: the next step starts new episodes)."""
        for env_id in env_ids:
            self.pending.pop(env_id, None)

    def reset(self) -> None:
        """Forget pending steps and unpaired async items."""
        self.pending.clear()
        self.seen.clear()
        self.pairer = AsyncPairer()

    # ------------------------------------------------------------------ adding

    def add_transition(self, env_ret: Any, policy_resp: Any) -> None:
        """One env step (see `Storage.add_transition`)."""
        if not isinstance(env_ret, EnvRet):
            raise TypeError(f"add_transition env_ret must be an EnvRet, got {type(env_ret).__name__}")
        if not isinstance(env_ret.env_id, str):
            raise TypeError(f"add_transition env_ret.env_id must be a string, got {type(env_ret.env_id).__name__}")
        if (
            policy_resp is None
            or isinstance(policy_resp, (str, bytes, dict, list, tuple))
            or not hasattr(policy_resp, "__dict__")
        ):
            raise TypeError(f"add_transition policy_resp must be a PolicyResponse, got {type(policy_resp).__name__}")
        env_id = env_ret.env_id
        if getattr(policy_resp, "env_id", env_id) != env_id:
            raise ValueError(
                f"PolicyResponse for env {policy_resp.env_id!r} cannot be paired with the EnvRet of env {env_id!r}"
            )
        prev = self.pending.get(env_id)
        obs, single = self.checks.check_obs(env_ret, prev.num_envs if prev is not None else None)
        if obs is not env_ret.observation:
            env_ret = dataclasses.replace(env_ret, observation=obs)
        num_envs = obs.shape[0]
        # Running statistics of the preprocessors change in preprocess_fn: a rejected step puts them back.
        procs = (self.pipeline.get("obs_preprocessor"), self.pipeline.get("reward_preprocessor"))
        states = [(p, p.state_dict()) for p in procs if p is not None and _stateful(p)]
        try:
            step = self.preprocess_fn(env_ret, policy_resp, **self.pipeline)
            step = self.checks.check_step(env_id, step, num_envs, single)
            drop = self.checks.nan_rows(env_id, step)
            if prev is not None:
                self._write(env_id, prev, step, env_ret, drop)
            elif drop is not None:
                state = self.writer.open_episodes(env_id, num_envs)
                state.dropping = state.dropping | torch.from_numpy(drop)
                self.writer.open[env_id] = state
        except Exception:
            for p, state in states:
                p.load_state_dict(state)
            raise
        self.pending[env_id] = _Pending(step, num_envs)
        self.seen.add(env_id)

    def _write(
        self,
        env_id: str,
        prev: _Pending,
        step: Dict[str, np.ndarray],
        env_ret: EnvRet,
        drop: Optional[np.ndarray],
    ) -> None:
        raw_reward = to_numpy(env_ret.last_reward).reshape(-1)  # one per row, or one for all
        what = f"env {env_id!r} step"
        self.writer.write_step(env_id, prev.num_envs, prev.step, step, raw_reward, drop, self.close_on_done, what)

    def add_data_async(self, item: Any) -> None:
        """An EnvRet or a PolicyResponse arriving on its own; pairs are added once both halves are here."""
        for env_ret, resp in self.pairer.push(item):
            self.add_transition(env_ret, resp)
