"""`Storage`: one buffer shard, in the calling process or as a Ray actor.

    storage = Storage(capacity=10_000, mode="circular", unit="transition", env_meta_list=metas, device="cpu")
    storage.add_transition(env_ret, policy_resp)     # one vectorised env step
    storage.truncate_episodes(["CartPole-v1-0"])     # close episodes in progress by hand
    batch = storage.sample(256)                      # TensorDict [256]

Steps go through the transition pipeline (`rlightning.buffer.utils.utils`)
into per-env `EpisodeTracker` records; finished episodes go through
``postprocess_fn`` and are written in place into preallocated tensors
(`TransitionStore` or `EpisodeStore`). Reading (sampling, views) lives in
`rlightning.buffer.utils.storage_read`.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Union

import numpy as np
import torch
from tensordict import TensorDict

from rlightning.buffer.utils.episode_input import AsyncPairer, episode_to_transitions
from rlightning.buffer.utils.episode_tracker import EpisodeTracker, FinishedEpisodes
from rlightning.buffer.utils.preprocessors import to_numpy
from rlightning.buffer.utils.samplers import make_sampler
from rlightning.buffer.utils.step_checks import StepChecker
from rlightning.buffer.utils.storage_read import StorageReadMixin
from rlightning.buffer.utils.storage_write import StorageWriteMixin
from rlightning.buffer.utils.tensor_store import EpisodeStore, TransitionStore, as_tensor_dict
from rlightning.buffer.utils.timing import OpTimer
from rlightning.buffer.utils.utils import (
    default_env_ret_preprocess_fn,
    default_policy_resp_preprocess_fn,
    default_postprocess_fn,
    default_preprocess_fn,
)
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.utils.logger import get_logger

__all__ = ["Storage", "StorageFullError"]

logger = get_logger(__name__)

_MODES = ("circular", "standard")
_UNITS = ("transition", "episode")
_NAN_GUARDS = ("raise", "drop", "warn")


class StorageFullError(ValueError):
    """A standard-mode storage has no room for the data; nothing was written."""


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"Storage {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


class Storage(StorageWriteMixin, StorageReadMixin):
    """Actual storage for a data buffer, sharded or not.

    Args:
        capacity: Slots: transitions (``unit="transition"``) or episodes (``unit="episode"``).
        mode: ``circular`` overwrites the oldest data; ``standard`` fills up, then an add raises.
        unit: What a slot (and a sampled index) is: a transition or a whole episode.
        env_meta_list: Metadata of the env workers that feed this storage (spaces used to check observations).
        device: Device of the storage tensors.
        obs_preprocessor: Applied to observation batches (None: unchanged).
        reward_preprocessor: Applied to reward batches (None: unchanged).
        env_ret_preprocess_fn: EnvRet to the env half of a step dict.
        policy_resp_preprocess_fn: PolicyResponse to the policy half of a step dict.
        preprocess_fn: (EnvRet, PolicyResponse) to a step dict.
        postprocess_fn: Finished episode TensorDict ``[T]`` to the TensorDict stored.
        auto_truncate_episode: End episodes on ``last_terminated`` / ``last_truncated``.
        sampler: ``uniform``, ``all``, ``batch`` or ``prioritized``.
        slice_len: Episode unit: sample slices of this many steps (None: whole episodes).
        nan_guard: A NaN or inf in an observation or reward: ``raise``, ``drop`` the episode, or ``warn``.
        priority_alpha: Prioritized sampler exponent.
        priority_beta: Prioritized sampler importance-weight exponent.
        priority_eps: Added to every priority.
        seed: Seed of the sampler (None: random).
        num_threads: Limit torch threads in this process (used when launched as an actor).
    """

    def __init__(
        self,
        capacity: int,
        mode: Literal["circular", "standard"] = "circular",
        unit: Literal["transition", "episode"] = "transition",
        env_meta_list: Optional[List[EnvMeta]] = None,
        device: Union[str, torch.device] = "cpu",
        obs_preprocessor: Optional[Callable] = None,
        reward_preprocessor: Optional[Callable] = None,
        env_ret_preprocess_fn: Optional[Callable] = default_env_ret_preprocess_fn,
        policy_resp_preprocess_fn: Optional[Callable] = default_policy_resp_preprocess_fn,
        preprocess_fn: Optional[Callable] = default_preprocess_fn,
        postprocess_fn: Optional[Callable] = default_postprocess_fn,
        auto_truncate_episode: bool = True,
        *,
        sampler: str = "uniform",
        slice_len: Optional[int] = None,
        nan_guard: Literal["raise", "drop", "warn"] = "raise",
        priority_alpha: float = 0.6,
        priority_beta: float = 0.4,
        priority_eps: float = 1e-6,
        seed: Optional[int] = None,
        num_threads: Optional[int] = None,
    ) -> None:
        if num_threads is not None:
            from rlightning.utils.utils import set_worker_threads

            set_worker_threads(num_threads)
        if isinstance(capacity, bool) or not isinstance(capacity, (int, np.integer)) or capacity < 1:
            raise ValueError(f"Storage capacity must be a positive integer, got {capacity!r}")
        _check_choice("mode", mode, _MODES)
        _check_choice("unit", unit, _UNITS)
        _check_choice("nan_guard", nan_guard, _NAN_GUARDS)
        if slice_len is not None and (not isinstance(slice_len, (int, np.integer)) or slice_len < 1):
            raise ValueError(f"Storage slice_len must be None or a positive integer, got {slice_len!r}")
        self.capacity = int(capacity)
        self.mode = mode
        self.unit = unit
        self.device = torch.device(device)
        self.slice_len = slice_len
        self.nan_guard = nan_guard
        self.auto_truncate_episode = bool(auto_truncate_episode)
        self.obs_preprocessor = obs_preprocessor
        self.reward_preprocessor = reward_preprocessor
        self.env_ret_preprocess_fn = env_ret_preprocess_fn or default_env_ret_preprocess_fn
        self.policy_resp_preprocess_fn = policy_resp_preprocess_fn or default_policy_resp_preprocess_fn
        self.preprocess_fn = preprocess_fn or default_preprocess_fn
        self.postprocess_fn = postprocess_fn or default_postprocess_fn
        if unit == "transition":
            self._store: Union[TransitionStore, EpisodeStore] = TransitionStore(self.capacity, mode, self.device)
        else:
            self._store = EpisodeStore(self.capacity, mode, self.device)
        self._init_writes()
        self.sampler = make_sampler(
            sampler, self.capacity, seed=seed, alpha=priority_alpha, beta=priority_beta, eps=priority_eps
        )
        self._fast_sample = unit == "transition" and sampler == "uniform"
        self._generator = torch.Generator()
        self._generator.manual_seed(seed if seed is not None else int(torch.randint(2**31, (1,)).item()))
        self._checks = StepChecker(env_meta_list or [], nan_guard)
        self._trackers: Dict[str, EpisodeTracker] = {}
        self._pairer = AsyncPairer()
        self._timer = OpTimer()
        self._recent: deque = deque(maxlen=100)
        self._ep_starts: deque = deque()
        self._lifetime_transitions = 0
        self._rate: deque = deque(maxlen=64)

    # ------------------------------------------------------------------ env metadata

    def set_env_metas(self, env_meta_list: Sequence[EnvMeta]) -> None:
        """Register env metadata (observation spaces are used to check observations)."""
        self._checks.set_env_metas(env_meta_list)

    def known_env_ids(self) -> List[str]:
        """Env ids this storage was told about or has seen."""
        return sorted(set(self._checks.metas) | set(self._trackers) | set(self._pairer.env_ids()))

    def _check_room(self, transitions: int, episodes: int, what: str) -> None:
        if self.mode != "standard":
            return
        need = transitions if self.unit == "transition" else episodes
        size = self.size
        if need and size + need > self.capacity:
            raise StorageFullError(
                f"standard-mode storage is full: capacity {self.capacity} {self.unit}s, size {size}, "
                f"{what} needs {need} more; nothing was stored (sample and clear it, or use mode='circular')"
            )

    # ------------------------------------------------------------------ adding

    def add_transition(self, env_ret: EnvRet, policy_resp: PolicyResponse) -> None:
        """Add one env step: an EnvRet and the PolicyResponse that answers it.

        Raises:
            ValueError: the observation's shape or dtype differs from the env's
                (naming the env, expected and got), a non-finite value with
                ``nan_guard="raise"``, or the response answers another env.
            StorageFullError: a standard-mode storage has no room for the episodes this step ends.
        """
        t0 = time.perf_counter()
        env_id = env_ret.env_id
        if getattr(policy_resp, "env_id", env_id) != env_id:
            raise ValueError(
                f"PolicyResponse for env {policy_resp.env_id!r} cannot be paired with the EnvRet of env {env_id!r}"
            )
        tracked = self._trackers[env_id].num_envs if env_id in self._trackers else None
        obs = self._checks.check_obs(env_ret, tracked)
        if obs is not env_ret.observation:
            env_ret = dataclasses.replace(env_ret, observation=obs)
        num_envs = obs.shape[0]
        # Running statistics of the preprocessors are updated by preprocess_fn: a rejected step puts them back.
        states = [(p, p.state_dict()) for p in (self.obs_preprocessor, self.reward_preprocessor) if p is not None]
        try:
            step = self.preprocess_fn(
                env_ret,
                policy_resp,
                obs_preprocessor=self.obs_preprocessor,
                reward_preprocessor=self.reward_preprocessor,
                env_ret_preprocess_fn=self.env_ret_preprocess_fn,
                policy_resp_preprocess_fn=self.policy_resp_preprocess_fn,
            )
            step = self._checks.check_step(env_id, step, num_envs)
            drop = self._checks.nan_rows(env_id, step)
            raw_done = step["terminated"] | step["truncated"]
            tracker = self._trackers.get(env_id)
            if tracker is None:
                tracker = EpisodeTracker(env_id, num_envs)
            close = self.auto_truncate_episode
            if self.mode == "standard" and close and raw_done.any():
                n, e = tracker.finishing(raw_done, drop)
                self._check_room(n, e, f"env {env_id!r} step")
        except Exception:
            for p, state in states:
                p.load_state_dict(state)
            raise
        self._trackers[env_id] = tracker
        finished = tracker.push(step, drop=drop, close_on_done=close)
        raw_reward = to_numpy(env_ret.last_reward).astype(np.float64).reshape(-1)
        if raw_reward.shape[0] != num_envs:
            raw_reward = np.broadcast_to(raw_reward, (num_envs,))
        for row, ret, length in tracker.update_env_stats(raw_reward, raw_done, env_ret.info):
            self._recent.append({"env_id": f"{env_id}/{row}", "return": ret, "length": length, "time": time.time()})
        if finished is not None:
            self._store_step_episodes(finished)
        self._timer.add("add_transition", time.perf_counter() - t0)

    def add_transitions(self, env_rets: Sequence[EnvRet], policy_resps: Sequence[PolicyResponse]) -> int:
        """Add several env steps in order; every valid pair is added, then the first error is raised.

        Returns:
            The storage size afterwards.
        """
        if len(env_rets) != len(policy_resps):
            raise ValueError(f"add_transitions got {len(env_rets)} EnvRets and {len(policy_resps)} PolicyResponses")
        errors: List[Exception] = []
        for env_ret, resp in zip(env_rets, policy_resps):
            try:
                self.add_transition(env_ret, resp)
            except (ValueError, KeyError, TypeError) as err:
                errors.append(err)
        if errors:
            if len(errors) > 1:
                logger.warning("%d of %d steps were rejected; raising the first", len(errors), len(env_rets))
            raise errors[0]
        return self.size

    def add_transitions_flat(self, num_pairs: int, *items: Any) -> int:
        """`add_transitions` with EnvRets then PolicyResponses as separate arguments (Ray resolves each ref)."""
        if len(items) != 2 * num_pairs:
            raise ValueError(
                f"add_transitions_flat expects {2 * num_pairs} items for {num_pairs} pairs, got {len(items)}"
            )
        return self.add_transitions(items[:num_pairs], items[num_pairs:])

    def add_data_async(self, item: Union[EnvRet, PolicyResponse]) -> None:
        """Add an EnvRet or a PolicyResponse that arrives on its own; pairs are added once both halves are here.

        Pairs are matched per env by ``ts_env_sent_ns`` (the response copies it from
        its EnvRet), else in arrival order.

        Raises:
            TypeError: an item that is neither an EnvRet nor a PolicyResponse.
        """
        for env_ret, resp in self._pairer.push(item):
            self.add_transition(env_ret, resp)

    def add_data_async_flat(self, *items: Any) -> int:
        """`add_data_async` for several items (Ray resolves each ref); returns the size afterwards."""
        errors = []
        for item in items:
            try:
                self.add_data_async(item)
            except (ValueError, KeyError, TypeError) as err:
                errors.append(err)
        if errors:
            raise errors[0]
        return self.size

    def add_episode(
        self,
        episode: Union[Dict, TensorDict],
        num_envs: int = 1,
        *,
        env_id: str = "episode",
        bootstrap_value: Optional[Any] = None,
    ) -> int:
        """Add complete episodes: a dict or TensorDict of ``[T, num_envs, ...]`` arrays.

        Needs ``obs`` (``T`` or ``T + 1`` steps: the extra one is the final
        observation), ``action`` and ``reward``; optional ``next_obs``,
        ``terminated``, ``truncated`` (missing: the last step is truncated),
        and any extras. A done flag inside a column splits it into episodes.

        Returns:
            The storage size afterwards.

        Raises:
            KeyError: a required key is missing.
            ValueError: inconsistent shapes, or keys that differ from the stored ones.
            StorageFullError: a standard-mode storage has no room; nothing is stored.
        """
        self.flush()
        with self._timer.time("add_episode"):
            data, lengths, boot = episode_to_transitions(episode, num_envs, bootstrap_value)
            self._check_room(int(lengths.sum()), int(lengths.shape[0]), "add_episode")
            finished = FinishedEpisodes(env_id, data, lengths, np.arange(lengths.shape[0]), boot)
            self._store_finished(finished)
            returns = np.add.reduceat(to_numpy(data["reward"]).astype(np.float64), np.cumsum(lengths) - lengths)
            now = time.time()
            for ret, length in zip(returns.tolist(), lengths.tolist()):
                self._recent.append({"env_id": env_id, "return": ret, "length": length, "time": now})
        return self.size

    def extend(self, transitions: Union[Dict, TensorDict]) -> int:
        """Write ready-made transitions (``[n, ...]`` per key) without the episode pipeline.

        Transition unit only: the fast path for offline data and benchmarks.

        Returns:
            The storage size afterwards.
        """
        t0 = time.perf_counter()
        if self.unit != "transition":
            raise ValueError("Storage.extend needs unit='transition'; with unit='episode' use add_episode")
        batch = as_tensor_dict(transitions)
        self.store.ring.check(batch, "extend")
        n = next(iter(batch.values())).shape[0] if batch else 0
        if self.mode == "standard":
            self._check_room(n, 0, "extend")
        self._write(batch, n, None, t0, "extend")
        return self.store.size

    # ------------------------------------------------------------------ truncation

    def _env_id_of(self, item: Any) -> str:
        env_id = item if isinstance(item, str) else getattr(item, "env_id", None)
        if not isinstance(env_id, str):
            raise TypeError(f"truncate expects an env id or an object with env_id, got {type(item).__name__}")
        if env_id not in self._trackers and env_id not in self._checks.metas and env_id not in self._pairer.env_ids():
            raise KeyError(f"unknown env {env_id!r}: this storage knows {self.known_env_ids()}")
        return env_id

    def truncate_one_episode(self, item: Union[str, Any]) -> None:
        """Manually finish the episodes in progress of one env (every sub-environment) and store them.

        Args:
            item: An env id, or an object with ``env_id`` (an EnvRet, a PolicyResponse).

        Raises:
            KeyError: an env this storage never saw nor was told about.
        """
        self.truncate_episodes([item])

    def truncate_episodes(self, env_ids: List[Union[str, Any]]) -> int:
        """Manually finish the episodes in progress of several envs and store them.

        The last step of each episode (its reward is not known yet) is dropped;
        its observation becomes the last ``next_obs`` and its value the bootstrap value.

        Returns:
            The storage size afterwards.

        Raises:
            KeyError: an unknown env (nothing is truncated).
            StorageFullError: a standard-mode storage has no room (nothing is truncated).
        """
        with self._timer.time("truncate"):
            ids = [self._env_id_of(item) for item in env_ids]
            self.flush()
            trackers = [self._trackers[i] for i in dict.fromkeys(ids) if i in self._trackers]
            if self.mode == "standard":
                counts = [t.truncating() for t in trackers]
                self._check_room(sum(c[0] for c in counts), sum(c[1] for c in counts), "truncate_episodes")
            for tracker in trackers:
                finished = tracker.truncate()
                if finished is not None:
                    self._store_finished(finished)
        return self.size

    # ------------------------------------------------------------------ state

    def get_size(self) -> int:
        """Stored slots: transitions, or episodes with ``unit="episode"``."""
        return self.size

    def __len__(self) -> int:
        return self.size

    def clear(self) -> None:
        """Clear all stored data (episodes in progress and unpaired async items are kept)."""
        self.flush()
        self._store.clear()
        self.sampler.on_clear()
        self._ep_starts.clear()

    def reset(self) -> None:
        """`clear`, and also forget episodes in progress and unpaired async items."""
        self.clear()
        self._trackers.clear()
        self._pairer = AsyncPairer()

    def timing_summary(self, reset: bool = False) -> Dict[str, Dict[str, float]]:
        """Time spent per operation: ``{op: {"calls", "total_s", "mean_ms"}}``."""
        self.flush()
        return self._timer.summary(reset)

    def print_timing_summary(self, reset: bool = False) -> None:
        """Log the time spent per operation (at INFO level; see `timing_summary` for the numbers)."""
        self.flush()
        logger.info("storage timing:\n%s", OpTimer.format(self._timer.summary(reset)))

    def adds_per_sec(self, window_s: float = 10.0) -> float:
        """Transitions written per second over the last ``window_s`` seconds of writes."""
        if len(self._rate) < 2:
            return 0.0
        t_last, n_last = self._rate[-1]
        t_first, n_first = self._rate[0]
        for t, n in self._rate:
            if t_last - t <= window_s:
                t_first, n_first = t, n
                break
        dt = t_last - t_first
        return (n_last - n_first) / dt if dt > 0 else 0.0

    def num_episodes(self) -> int:
        """Whole episodes stored (with ``unit="transition"``: episodes none of whose steps was overwritten)."""
        if self.unit == "episode":
            return self.store.size
        oldest = self._lifetime_transitions - self.store.size
        while self._ep_starts and self._ep_starts[0] < oldest:
            self._ep_starts.popleft()
        return len(self._ep_starts)

    def stats(self) -> Dict[str, Any]:
        """A plain snapshot: size, capacity, episodes, transitions, recent episodes, adds per second."""
        self.flush()
        return {
            "size": self.store.size,
            "capacity": self.capacity,
            "unit": self.unit,
            "mode": self.mode,
            "episodes": self.num_episodes(),
            "transitions": self.store.num_transitions,
            "transitions_written": self._lifetime_transitions,
            "in_progress": sum(t.pending_transitions for t in self._trackers.values()),
            "env_ids": sorted(self._trackers),
            "recent_episodes": list(self._recent),
            "adds_per_sec": self.adds_per_sec(),
            "nbytes": self.store.ring.nbytes(),
        }

    def __repr__(self) -> str:
        return (
            f"Storage(capacity={self.capacity}, mode={self.mode!r}, unit={self.unit!r}, size={self.size}, "
            f"sampler={self.sampler.name!r}, device={self.device})"
        )
