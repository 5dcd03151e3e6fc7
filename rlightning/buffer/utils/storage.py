"""`Storage`: one buffer shard, in the calling process or as a Ray actor.

    storage = Storage(capacity=10_000, mode="circular", unit="transition", env_meta_list=metas, device="cpu")
    storage.add_rollout(record)                      # a TensorDict [N] or [N, T] (rlightning.types.record)
    storage.add_transition(env_ret, policy_resp)     # the seed edge: one vectorised (or single) env step
    storage.truncate_episodes(["CartPole-v1-0"])     # close episodes in progress by hand
    batch = storage.sample(256)                      # TensorDict [256]

A Storage is composed of objects that own their state: a `StorageWriter`
(open episodes per env, per-step adds staged in numpy until an episode closes,
the writes into the preallocated store, counters), a
`StorageReader` (sampling, copies), a `SeedEdge` (per-step seed inputs turned
into records) and a `StepChecker`. Records are validated once per add and
written with one copy per key (see `rlightning.buffer.utils.storage_writer`).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence, Union

import numpy as np
import torch
from tensordict import TensorDict

from rlightning.buffer.utils.episode_input import episode_to_transitions
from rlightning.buffer.utils.preprocessors import to_numpy
from rlightning.buffer.utils.record_chunks import chunk_from_record, nonfinite_steps, preprocess_chunk
from rlightning.buffer.utils.samplers import make_sampler
from rlightning.buffer.utils.seed_edge import SeedEdge
from rlightning.buffer.utils.step_checks import StepChecker
from rlightning.buffer.utils.storage_read import StorageReader
from rlightning.buffer.utils.storage_writer import StorageFullError, StorageWriter
from rlightning.buffer.utils.tensor_store import (
    EpisodeStore,
    TransitionStore,
    as_tensor_dict,
    pack_tensordicts,
    unpack_tensordicts,
)
from rlightning.buffer.utils.timing import OpTimer
from rlightning.buffer.utils.utils import (
    default_env_ret_preprocess_fn,
    default_policy_resp_preprocess_fn,
    default_postprocess_fn,
    default_preprocess_fn,
)
from rlightning.types import EnvMeta, EnvRet, PolicyResponse
from rlightning.types.record import Spec, read_leaves, record_env_id, validate_record
from rlightning.utils.logger import get_logger

__all__ = ["Storage", "StorageFullError"]

logger = get_logger(__name__)

_MODES = ("circular", "standard")
_UNITS = ("transition", "episode")
_NAN_GUARDS = ("raise", "drop", "warn")


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise ValueError(f"Storage {name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def _stateful(p: Any) -> bool:
    return callable(getattr(p, "state_dict", None)) and callable(getattr(p, "load_state_dict", None))


class Storage:
    """Actual storage for a data buffer, sharded or not.

    Args:
        capacity: Slots: transitions (``unit="transition"``) or episodes (``unit="episode"``).
        mode: ``circular`` overwrites the oldest data; ``standard`` fills up, then an add raises.
        unit: What a slot (and a sampled index) is: a transition or a whole episode.
        env_meta_list: Metadata of the env workers that feed this storage (spaces used to check observations).
        device: Device of the storage tensors.
        obs_preprocessor: Any callable applied to observation batches (None: unchanged).
        reward_preprocessor: Any callable applied to reward batches (None: unchanged).
        env_ret_preprocess_fn: EnvRet to the env half of a step dict.
        policy_resp_preprocess_fn: PolicyResponse to the policy half of a step dict.
        preprocess_fn: (EnvRet, PolicyResponse) to a step dict.
        postprocess_fn: Finished episode TensorDict ``[T]`` to the TensorDict stored.
        auto_truncate_episode: End episodes on ``last_terminated`` / ``last_truncated``.
        sampler: ``uniform``, ``all``, ``batch`` or ``prioritized``.
        slice_len: Episode unit: sample slices of this many steps (None: whole episodes).
        burn_in: Episode unit with ``slice_len``: also this many steps before each slice, flagged ``burn_in``.
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
        burn_in: int = 0,
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
        if isinstance(burn_in, bool) or not isinstance(burn_in, (int, np.integer)) or burn_in < 0:
            raise ValueError(f"Storage burn_in must be an integer >= 0, got {burn_in!r}")
        if burn_in and (unit != "episode" or slice_len is None):
            raise ValueError(
                f"Storage burn_in={burn_in} warms up a state before fixed-length slices: it needs unit='episode' "
                f"and a slice_len (got unit={unit!r}, slice_len={slice_len!r})"
            )
        for name, fn in (("obs_preprocessor", obs_preprocessor), ("reward_preprocessor", reward_preprocessor)):
            if fn is not None and not callable(fn):
                raise TypeError(f"Storage {name} must be a callable on a batch (or None), got {type(fn).__name__}")
        self.capacity = int(capacity)
        self.mode = mode
        self.unit = unit
        self.device = torch.device(device)
        self.slice_len = slice_len
        self.nan_guard = nan_guard
        self.auto_truncate_episode = bool(auto_truncate_episode)
        self.obs_preprocessor = obs_preprocessor
        self.reward_preprocessor = reward_preprocessor
        self.postprocess_fn = postprocess_fn or default_postprocess_fn
        if unit == "transition":
            self.store: Union[TransitionStore, EpisodeStore] = TransitionStore(self.capacity, mode, self.device)
        else:
            self.store = EpisodeStore(self.capacity, mode, self.device)
        self.sampler = make_sampler(
            sampler, self.capacity, seed=seed, alpha=priority_alpha, beta=priority_beta, eps=priority_eps
        )
        generator = torch.Generator()
        generator.manual_seed(seed if seed is not None else int(torch.randint(2**31, (1,)).item()))
        self.timer = OpTimer()
        on_write = self.sampler.on_write if self.sampler.name == "prioritized" else None
        self.writer = StorageWriter(self.store, unit, mode, self.postprocess_fn, on_write, self.timer)
        self._slice_generator = generator
        self.reader = StorageReader(self.store, self.sampler, unit, slice_len, generator, self.timer, int(burn_in))
        self.checks = StepChecker(env_meta_list or [], nan_guard)
        pipeline = dict(
            preprocess_fn=preprocess_fn or default_preprocess_fn,
            obs_preprocessor=obs_preprocessor,
            reward_preprocessor=reward_preprocessor,
            env_ret_preprocess_fn=env_ret_preprocess_fn or default_env_ret_preprocess_fn,
            policy_resp_preprocess_fn=policy_resp_preprocess_fn or default_policy_resp_preprocess_fn,
        )
        self.seed_edge = SeedEdge(self.writer, self.checks, pipeline, self.auto_truncate_episode)
        self._record_spec: Optional[Spec] = None

    # ------------------------------------------------------------------ env metadata

    def set_env_metas(self, env_meta_list: Sequence[EnvMeta]) -> None:
        """Register env metadata (observation spaces are used to check observations)."""
        self.checks.set_env_metas(env_meta_list)

    def known_env_ids(self) -> List[str]:
        """Env ids this storage was told about or has seen."""
        return sorted(set(self.checks.metas) | set(self.writer.open) | set(self.seed_edge.env_ids()))

    @property
    def fast_sample(self) -> bool:
        """True when `sample` takes the one-gather hot path (transition unit, uniform sampler)."""
        return self.reader.fast_sample

    @property
    def size(self) -> int:
        """Stored slots: transitions, or episodes with ``unit="episode"``."""
        return self.store.size

    # ------------------------------------------------------------------ records

    def add_rollout(self, td: TensorDict) -> int:
        """Add one rollout record: a TensorDict ``[N]`` (one vector step) or ``[N, T]`` (a chunk) of one env.

        The record is validated once (keys, dtypes, shapes against the env's observation space and
        the records stored before), its closed episodes are written with one copy per key, its open
        episodes are held (by reference: do not write into a record after adding it) until a later
        record of the same env closes them. Invalid (autoreset) steps are never stored.

        Returns:
            The storage size afterwards.

        Raises:
            TypeError, ValueError, KeyError: a malformed record, a NaN or inf with ``nan_guard="raise"``
                (naming the key and what was expected); nothing is stored.
            StorageFullError: a standard-mode storage has no room; nothing is stored.
        """
        t0 = time.perf_counter()
        env_id = record_env_id(td) if isinstance(td, TensorDict) else None
        meta = self.checks.metas.get(env_id) if env_id is not None else None
        state = self.writer.open.get(env_id) if env_id is not None else None
        num_envs = state.n if state is not None else (meta.num_envs if meta is not None else None)
        leaves = read_leaves(td) if isinstance(td, TensorDict) else None  # read once, for both steps below
        spec = validate_record(
            td,
            num_envs=num_envs,
            observation_space=meta.observation_space if meta is not None else None,
            spec=self._record_spec,
            require_env_id=env_id is None,  # read above: a string id needs no second look
            name="add_rollout record",
            leaves=leaves,
        )
        chunk, valid, raw_done, reward = chunk_from_record(td, self.auto_truncate_episode, leaves)
        procs = (self.obs_preprocessor, self.reward_preprocessor)
        states = [(p, p.state_dict()) for p in procs if p is not None and _stateful(p)]
        try:
            preprocess_chunk(chunk, self.obs_preprocessor, self.reward_preprocessor)
            bad, where = nonfinite_steps(chunk)
            if bad is not None:
                msg = f"env {env_id!r}: non-finite values in {where}"
                if self.nan_guard == "raise":
                    raise ValueError(f"{msg}; nothing was stored (nan_guard='raise'; 'drop' or 'warn' go on)")
                if self.nan_guard == "drop":
                    logger.warning("%s; dropping those sub-environments' episodes", msg)
                else:
                    logger.warning("%s; storing them anyway (nan_guard='warn')", msg)
                    bad = None
            self.writer.write_chunk(env_id, chunk, bad, reward, raw_done, valid, f"env {env_id!r} record")
        except Exception:
            for p, st in states:
                p.load_state_dict(st)
            raise
        if self._record_spec is None:
            self._record_spec = spec
        self.timer.add("add_rollout", time.perf_counter() - t0)
        return self.size

    def add_rollouts(self, *tds: TensorDict) -> int:
        """`add_rollout` for several records in order; every valid one is added, then the first error is raised."""
        errors: List[Exception] = []
        for td in tds:
            try:
                self.add_rollout(td)
            except (ValueError, KeyError, TypeError) as err:
                errors.append(err)
        if errors:
            raise errors[0]
        return self.size

    # ------------------------------------------------------------------ the seed edge

    def add_transition(self, env_ret: EnvRet, policy_resp: PolicyResponse) -> None:
        """Add one env step: an EnvRet and the PolicyResponse that answers it.

        A vectorised env (observation ``[num_envs, ...]``) or a single unbatched one (an
        observation of the space's own shape, a scalar reward and bool flags, a scalar action).

        Raises:
            TypeError: arguments of the wrong kind (not an EnvRet, not a response, junk values).
            ValueError: the observation's shape or dtype differs from the env's
                (naming the env, expected and got), a non-finite value with
                ``nan_guard="raise"``, or the response answers another env.
            StorageFullError: a standard-mode storage has no room for the episodes this step ends.
        """
        t0 = time.perf_counter()
        self.seed_edge.add_transition(env_ret, policy_resp)
        self.timer.add("add_transition", time.perf_counter() - t0)

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
        self.seed_edge.add_data_async(item)

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
        """Add complete episodes: a dict or TensorDict of ``[T, num_envs, ...]`` arrays (``[T, ...]`` for one env).

        Needs ``obs`` (``T`` or ``T + 1`` steps: the extra one is the final
        observation; or ``next_obs``); ``action``, ``reward``, ``terminated``,
        ``truncated`` (missing: the last step is truncated) and any extras are
        stored as given. A done flag inside a column splits it into episodes.

        Returns:
            The storage size afterwards.

        Raises:
            TypeError: not a dict or TensorDict, or values that are not arrays of numbers.
            KeyError: ``obs`` is missing.
            ValueError: inconsistent shapes, or keys that differ from the stored ones.
            StorageFullError: a standard-mode storage has no room; nothing is stored.
        """
        with self.timer.time("add_episode"):
            data, lengths, boot = episode_to_transitions(episode, num_envs, bootstrap_value)
            self.writer.check_room(int(lengths.sum()), int(lengths.shape[0]), "add_episode")
            self.writer.write_episodes(env_id, data, lengths, boot)
            if "reward" in data:
                rewards = to_numpy(data["reward"]).astype(np.float64).reshape(-1)
                returns = np.add.reduceat(rewards, np.cumsum(lengths) - lengths)
            else:
                returns = np.zeros(lengths.shape[0])
            self.writer.add_recent(env_id, returns.tolist(), lengths.tolist())
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
        self.writer.check_room(n, 0, "extend")
        self.writer.write(batch, n, None, "extend")
        self.timer.add("extend_total", time.perf_counter() - t0)
        return self.store.size

    # ------------------------------------------------------------------ truncation

    def _env_id_of(self, item: Any) -> str:
        env_id = item if isinstance(item, str) else getattr(item, "env_id", None)
        if not isinstance(env_id, str):
            raise TypeError(f"truncate expects an env id or an object with env_id, got {type(item).__name__}")
        if env_id not in self.known_env_ids():
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

        The last stored step of each episode is marked truncated; its ``next.value`` is the bootstrap.
        For the seed edge the newest step of each env (its reward is not known yet) is dropped: its
        observation is the last ``next_obs``, its value the bootstrap; the env's next step starts
        new episodes.

        Returns:
            The storage size afterwards.

        Raises:
            KeyError: an unknown env (nothing is truncated).
            StorageFullError: a standard-mode storage has no room (nothing is truncated).
        """
        with self.timer.time("truncate"):
            ids = [self._env_id_of(item) for item in env_ids]
            self.writer.truncate(ids)
            self.seed_edge.drop_pending(ids)
        return self.size

    # ------------------------------------------------------------------ reading

    def sample(self, batch_size: int, num_batches: int = 1) -> TensorDict:
        """Draw one batch, or ``num_batches`` one after the other (see `StorageReader.sample`)."""
        return self.reader.sample(batch_size, num_batches)

    def sample_parts(
        self,
        num_parts: int = 1,
        batch_size: Optional[int] = None,
        clear_after: bool = False,
        num_batches: int = 1,
    ) -> List[TensorDict]:
        """Draw ``num_parts`` batches in one gather; ``clear_after`` clears the storage afterwards (on-policy).

        ``num_batches``: each part holds that many independent batches (uniform sampler; `StorageReader.sample`).
        """
        parts = self.reader.sample_parts(num_parts, batch_size, num_batches)
        if clear_after:
            self.clear()
        return parts

    def update_priorities(self, index: Any, priority: Any) -> None:
        """Set priorities of sampled slots (see `StorageReader.update_priorities`)."""
        self.reader.update_priorities(index, priority)

    def get_data(self) -> TensorDict:
        """All stored transitions as a TensorDict ``[n]``, oldest first (a copy)."""
        return self.reader.get_data()

    def sample_rows(self, n: int = 5) -> TensorDict:
        """The ``n`` most recently stored transitions (for display), oldest first."""
        return self.reader.sample_rows(n)

    def call_packed(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` with arguments and results as numpy dicts (how remote shards talk to the driver).

        Torch tensors pickle slowly; a TensorDict of numpy arrays travels through Ray cheaply.
        """
        args = tuple(unpack_tensordicts(a) for a in args)
        kwargs = {k: unpack_tensordicts(v) for k, v in kwargs.items()}
        return pack_tensordicts(getattr(self, method)(*args, **kwargs))

    def view(self) -> Any:
        """A read-only `BufferView` of everything stored."""
        from rlightning.buffer.utils.buffer_view import BufferView

        return BufferView(self.get_data())

    # ------------------------------------------------------------------ state

    def get_size(self) -> int:
        """Stored slots: transitions, or episodes with ``unit="episode"``."""
        return self.size

    def __len__(self) -> int:
        return self.size

    def rng_state(self) -> Dict[str, Any]:
        """The sampler's and the slice reader's generator states, and a prioritized sampler's priorities in the
        order `get_data` gives the data (plain tensors and ints: a checkpoint keeps them, so a resumed run draws
        the same batches)."""
        gen = self.sampler.generator
        rng = getattr(self.sampler, "_rng", None)
        state = {
            "sampler": gen.get_state() if gen is not None else None,
            "slices": self._slice_generator.get_state(),
            "numpy": dict(rng.bit_generator.state) if rng is not None else None,
        }
        tree = getattr(self.sampler, "tree", None)
        if tree is not None and self.unit == "transition":  # priorities, in the order get_data gives the data
            state["priorities"] = torch.from_numpy(tree.get(self.store.ordered_slots().numpy()).copy())
            state["max_priority"] = float(self.sampler.max_priority)
        return state

    def set_rng_state(self, state: Dict[str, Any]) -> None:
        """Restore what `rng_state` returned (the priorities once the saved data is back: of as many slots)."""
        if state.get("sampler") is not None and self.sampler.generator is not None:
            self.sampler.generator.set_state(state["sampler"])
        if state.get("slices") is not None:
            self._slice_generator.set_state(state["slices"])
        rng = getattr(self.sampler, "_rng", None)
        if state.get("numpy") is not None and rng is not None:
            rng.bit_generator.state = state["numpy"]
        tree, priorities = getattr(self.sampler, "tree", None), state.get("priorities")
        if tree is not None and priorities is not None and self.unit == "transition":
            slots = self.store.ordered_slots()  # the restored data, oldest first, as it was saved
            if slots.shape[0] == priorities.shape[0]:
                tree.set(slots.numpy(), priorities.numpy())
                self.sampler.max_priority = float(state["max_priority"])

    def clear(self) -> None:
        """Clear all stored data (episodes in progress and unpaired async items are kept)."""
        self.writer.clear()
        self.sampler.on_clear()

    def reset(self) -> None:
        """`clear`, and also forget episodes in progress and unpaired async items."""
        self.clear()
        self.writer.forget_open()
        self.seed_edge.reset()

    def timing_summary(self, reset: bool = False) -> Dict[str, Dict[str, float]]:
        """Time spent per operation: ``{op: {"calls", "total_s", "mean_ms"}}``."""
        return self.timer.summary(reset)

    def print_timing_summary(self, reset: bool = False) -> None:
        """Log the time spent per operation (at INFO level; see `timing_summary` for the numbers)."""
        logger.info("storage timing:\n%s", OpTimer.format(self.timer.summary(reset)))

    def adds_per_sec(self, window_s: float = 10.0) -> float:
        """Transitions written per second over the last ``window_s`` seconds of writes."""
        return self.writer.adds_per_sec(window_s)

    def num_episodes(self) -> int:
        """Whole episodes stored (with ``unit="transition"``: episodes none of whose steps was overwritten)."""
        return self.writer.num_episodes()

    def stats(self) -> Dict[str, Any]:
        """A plain snapshot: size, capacity, episodes, transitions, recent episodes, adds per second."""
        return {
            "size": self.store.size,
            "capacity": self.capacity,
            "unit": self.unit,
            "mode": self.mode,
            "episodes": self.num_episodes(),
            "transitions": self.store.num_transitions,
            "transitions_written": self.writer.lifetime_transitions,
            "in_progress": self.writer.pending_transitions() + self.seed_edge.pending_rows(),
            "env_ids": sorted(set(self.writer.open) | set(self.seed_edge.pending)),
            "recent_episodes": list(self.writer.recent),
            "adds_per_sec": self.adds_per_sec(),
            "nbytes": self.store.ring.nbytes(),
        }

    def __repr__(self) -> str:
        return (
            f"Storage(capacity={self.capacity}, mode={self.mode!r}, unit={self.unit!r}, size={self.size}, "
            f"sampler={self.sampler.name!r}, device={self.device})"
        )
