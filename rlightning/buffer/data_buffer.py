"""`DataBuffer`: the experience store, one local `Storage` or N shards as Ray actors.

    buffer = build_data_buffer("replay", cfg.buffer)
    buffer.init(env_metas, num_storages=2, num_train_workers=2)   # shards: actors if remote
    buffer.add_rollouts(records)                                   # TensorDicts [N] / [N, T] (types.record)
    buffer.add_batched_transition(env_rets, policy_resps)          # the seed edge: BatchedData, refs allowed
    batches = buffer.sample(256)                                   # one TensorDict per train worker

Every call on the hot path is one call per shard: items are grouped by the
shard the `EpisodeTable` assigns their env to. With remote shards, ObjectRefs
are handed to the actors as top-level arguments (Ray resolves them there);
with local shards they are fetched with one ``resolve``. The buffer holds a
`ShardSet` (the shards, their last known sizes, calls and recovery) and a
`BufferSampler` (one batch per train worker, priorities).
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

import numpy as np
import torch
from tensordict import TensorDict

from rlightning.buffer.buffer_sampling import BufferSampler
from rlightning.buffer.shard_recovery import ShardSet, StorageShardLostError
from rlightning.buffer.sharding import as_items, merge_stats, pair_items, shard_base_seed
from rlightning.buffer.utils import BufferView, EpisodeTable
from rlightning.buffer.utils.preprocessors import ComposePreprocessor, RunningMeanStdPreprocessor
from rlightning.buffer.utils.tensor_store import unpack_tensordicts
from rlightning.buffer.utils.timing import OpTimer
from rlightning.buffer.utils.utils import (
    default_env_ret_preprocess_fn,
    default_obs_preprocessor,
    default_policy_resp_preprocess_fn,
    default_postprocess_fn,
    default_preprocess_fn,
    default_reward_preprocessor,
)
from rlightning.types import BatchedData, EnvMeta, EnvRet, is_object_ref, record_env_id
from rlightning.utils.config import BufferConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.placement import Placement, check_placement_args, resolve_placement, with_env_vars
from rlightning.utils.ray.handle import resolve

__all__ = ["DataBuffer", "StorageShardLostError"]

logger = get_logger(__name__)


class DataBuffer:
    """The data buffer: routes data to storage shards and samples one batch per train worker.

    Args:
        config: The buffer settings.
        obs_preprocessor: Applied to observation batches before storing.
        reward_preprocessor: Applied to reward batches before storing.
        env_ret_preprocess_fn: EnvRet to the env half of a step dict.
        policy_resp_preprocess_fn: PolicyResponse to the policy half of a step dict.
        preprocess_fn: (EnvRet, PolicyResponse) to a step dict.
        postprocess_fn: Finished episode to stored transitions (e.g. GAE).
        remote: Storage shards as Ray actors (True) or in this process (False); None: as ``placement`` says.
        placement: The run's `Placement` (its ``remote_storage``; its actors' ``RLIGHTNING_*`` variables);
            None with ``remote`` None: as ``InternalFlag.REMOTE_STORAGE`` says when `init` runs.
    """

    #: Clear the shards once a sample has consumed them (on-policy buffers).
    clear_after_sample = False

    def __init__(
        self,
        config: BufferConfig,
        obs_preprocessor: Optional[Callable] = default_obs_preprocessor,
        reward_preprocessor: Optional[Callable] = default_reward_preprocessor,
        env_ret_preprocess_fn: Optional[Callable] = default_env_ret_preprocess_fn,
        policy_resp_preprocess_fn: Optional[Callable] = default_policy_resp_preprocess_fn,
        preprocess_fn: Optional[Callable] = default_preprocess_fn,
        postprocess_fn: Optional[Callable] = default_postprocess_fn,
        *,
        remote: Optional[bool] = None,
        placement: Optional[Placement] = None,
    ) -> None:
        check_placement_args(remote, placement)  # InternalFlag is read when init() runs
        self._placement_args = (remote, placement)
        if isinstance(config, dict):
            config = BufferConfig(**config)
        if not isinstance(config, BufferConfig):
            raise TypeError(f"DataBuffer config must be a BufferConfig, got {type(config).__name__}")
        self.config = config
        if config.normalize_obs:
            obs_preprocessor = ComposePreprocessor(obs_preprocessor, RunningMeanStdPreprocessor(center=True))
        if config.normalize_reward:
            reward_preprocessor = ComposePreprocessor(reward_preprocessor, RunningMeanStdPreprocessor(center=False))
        self.obs_preprocessor = obs_preprocessor
        self.reward_preprocessor = reward_preprocessor
        self.env_ret_preprocess_fn = env_ret_preprocess_fn
        self.policy_resp_preprocess_fn = policy_resp_preprocess_fn
        self.preprocess_fn = preprocess_fn
        self.postprocess_fn = postprocess_fn
        self.episode_table: Optional[EpisodeTable] = None
        self._next_episode_shard = 0
        self._timer = OpTimer()
        #: The storage shards, their sizes and their recovery.
        self.shards = ShardSet(config.unit, config.on_shard_loss, config.seed, self._describe_shard)
        #: Sampling over the shards.
        self.sampling = BufferSampler(
            self.shards, self._require_init, config.sampler, config.unit, self.clear_after_sample, self._timer
        )

    # ------------------------------------------------------------------ setup

    def _storage_kwargs(self, env_meta_list: List[EnvMeta]) -> Dict[str, Any]:
        cfg = self.config
        return dict(
            capacity=cfg.capacity,
            mode=cfg.mode,
            unit=cfg.unit,
            env_meta_list=env_meta_list,
            device=cfg.device,
            obs_preprocessor=self.obs_preprocessor,
            reward_preprocessor=self.reward_preprocessor,
            env_ret_preprocess_fn=self.env_ret_preprocess_fn,
            policy_resp_preprocess_fn=self.policy_resp_preprocess_fn,
            preprocess_fn=self.preprocess_fn,
            postprocess_fn=self.postprocess_fn,
            auto_truncate_episode=cfg.auto_truncate_episode,
            sampler=cfg.sampler,
            slice_len=cfg.slice_len,
            burn_in=cfg.burn_in,
            nan_guard=cfg.nan_guard,
            priority_alpha=cfg.priority_alpha,
            priority_beta=cfg.priority_beta,
            priority_eps=cfg.priority_eps,
        )

    def init(
        self,
        env_meta_list: Sequence[EnvMeta],
        env_ids: Optional[Sequence[str]] = None,
        *,
        num_storages: int = 1,
        num_train_workers: int = 1,
        storage_options: Optional[Union[Dict[str, Any], Sequence[Dict[str, Any]]]] = None,
        component_distribution: Optional[Dict[str, Dict[str, Dict[str, Any]]]] = None,
        node_affinity_env: Optional[bool] = None,
        node_affinity_train: Optional[bool] = None,
        run_seed: Optional[int] = None,
    ) -> DataBuffer:
        """Create the storage shards: local objects, or Ray actors as the buffer's ``remote`` / ``placement`` say.

        Args:
            env_meta_list: Metadata of the env workers (observation spaces check the data).
            env_ids: Env ids to place on shards now (default: those of ``env_meta_list``).
            num_storages: Number of shards (``ClusterConfig.buffer_worker_num``).
            num_train_workers: Number of train workers fed by ``sample``.
            storage_options: Ray actor options of each shard (``num_cpus`` default 1, ...), or a list of
                them, one per shard (e.g. a node affinity each).
            component_distribution: Where storages, envs and train workers run (node affinity).
            node_affinity_env: Bind envs to shards on their node (None: whenever a distribution is given).
            node_affinity_train: Bind train workers to shards on their node (None: likewise).
            run_seed: The run's seed (``MainConfig.seed``): with ``buffer.seed`` unset the shards' samplers
                are seeded from it (`shard_base_seed`), so a seeded run draws the same batches again;
                an explicit ``buffer.seed`` wins. None with ``buffer.seed`` unset: random draws.

        Returns:
            self.

        Raises:
            ValueError: ``num_storages < 1``, or train workers that cannot be split evenly over the shards.
        """
        if isinstance(num_train_workers, bool) or not isinstance(num_train_workers, int) or num_train_workers < 1:
            raise ValueError(f"DataBuffer.init num_train_workers must be an integer >= 1, got {num_train_workers!r}")
        metas = list(env_meta_list or [])
        if env_ids is None:
            env_ids = [m.env_id for m in metas if getattr(m, "env_id", None) is not None]
        affinity = component_distribution is not None
        table = EpisodeTable(
            num_storages,
            list(env_ids),
            num_train_workers,
            component_distribution,
            node_affinity_env=affinity if node_affinity_env is None else bool(node_affinity_env),
            node_affinity_train=affinity if node_affinity_train is None else bool(node_affinity_train),
        )
        kwargs = self._storage_kwargs(metas)
        placement = resolve_placement("storage", *self._placement_args)
        if isinstance(storage_options, (list, tuple)):
            if len(storage_options) != num_storages:
                raise ValueError(
                    f"DataBuffer.init storage_options has {len(storage_options)} entries for {num_storages} "
                    "shards; give one dict for all shards or one per shard"
                )
            storage_options = [with_env_vars(o, placement.env_vars()) for o in storage_options]
        else:
            storage_options = with_env_vars(storage_options, placement.env_vars())
        self.shards.seed = shard_base_seed(self.config.seed, run_seed)
        self.shards.launch(kwargs, num_storages, placement.remote_storage, storage_options)
        self.episode_table = table
        logger.info(
            "data buffer: %d %s shard(s), capacity %d %ss each",
            num_storages,
            "remote" if self.is_remote else "local",
            self.config.capacity,
            self.config.unit,
        )
        return self

    def _require_init(self) -> EpisodeTable:
        if self.episode_table is None:
            raise RuntimeError("the DataBuffer has no storage yet: call buffer.init(env_meta_list) first")
        return self.episode_table

    def _describe_shard(self, shard: int) -> Dict[str, Any]:
        table = self._require_init()
        workers = table.get_storage_to_train_workers()[shard]
        return {"env_ids": table.get_envs_for_storage(shard), "train_workers": workers}

    @property
    def _sizes(self) -> List[int]:
        """Last known size of each shard."""
        return self.shards.sizes

    @property
    def is_remote(self) -> bool:
        """True when the shards are Ray actors."""
        return self.shards.is_remote

    @property
    def num_storages(self) -> int:
        """Number of storage shards."""
        return len(self.shards)

    @property
    def storages(self) -> List[Any]:
        """The shards (Storage objects or actor handles)."""
        return [h.worker for h in self.shards.handles]

    @property
    def lost_shards(self) -> List[Dict[str, Any]]:
        """One record per storage shard actor that died: what it held and when (see `stats`)."""
        return self.shards.lost

    @property
    def shard_restarts(self) -> int:
        """Storage shard actors that died and were replaced so far."""
        return self.shards.restarts

    def dead_shards(self, timeout: float = 60.0) -> List[int]:
        """Indices of remote shards whose actor is dead."""
        return self.shards.dead_shards(timeout)

    def sample(self, batch_size: Optional[int] = None, num_batches: int = 1) -> List[TensorDict]:
        """Draw one batch per train worker from that worker's shards, or ``num_batches`` one after the other
        (uniform sampler; see `BufferSampler.sample`)."""
        return self.sampling.sample(batch_size, num_batches)

    def can_sample(self, batch_size: int) -> bool:
        """True when every train worker's shards hold at least ``batch_size`` items together."""
        return self.sampling.can_sample(batch_size)

    def update_priorities(self, batch_or_index: Any, priority: Any, shard: Any = None) -> None:
        """Set priorities of sampled items (see `BufferSampler.update_priorities`)."""
        self.sampling.update_priorities(batch_or_index, priority, shard)

    def close(self) -> None:
        """Stop remote shards (local ones are dropped); the buffer needs `init` again."""
        self.shards.close()
        self.episode_table = None

    # ------------------------------------------------------------------ routing

    def _shard_of(self, env_id: Any, register: bool = True) -> int:
        table = self._require_init()
        if not isinstance(env_id, str):
            raise TypeError(f"env ids must be strings, got {type(env_id).__name__} {env_id!r}")
        if not register and not table.has_env(env_id):
            raise KeyError(f"unknown env {env_id!r}: the buffer knows {sorted(table.get_env_to_storage())}")
        return table.get_storage_idx_for_env(env_id)

    def _new_env_ids(self, env_ids: Sequence[Any]) -> List[str]:
        table = self._require_init()
        return [e for e in dict.fromkeys(env_ids) if isinstance(e, str) and not table.has_env(e)]

    def _forget_rejected(self, new_ids: List[str]) -> None:
        """After a failed add: unassign new env ids whose shard stored nothing of them (keeps routing clean)."""
        table = self.episode_table
        if not new_ids or table is None:
            return
        shards = sorted({table.get_storage_idx_for_env(e) for e in new_ids})
        try:
            known = dict(zip(shards, resolve([self.shards.handles[s].submit("known_env_ids") for s in shards])))
        except Exception:  # noqa: BLE001 - a dead shard: leave the table as it is
            return
        for env_id in new_ids:
            if env_id not in known[table.get_storage_idx_for_env(env_id)]:
                table.forget_env(env_id)

    def add_rollout(self, td: TensorDict) -> None:
        """Add one rollout record (``[N]`` or ``[N, T]``, see `rlightning.types.record`) to its env's shard.

        Routed by the record's ``env_id`` through the episode table; validated and written by the shard
        (`Storage.add_rollout`).

        Raises:
            TypeError: not a TensorDict, or no string ``env_id``.
            ValueError, KeyError: a malformed record (nothing of it is stored).
        """
        self.add_rollouts([td])

    def add_rollouts(self, tds: Sequence[TensorDict]) -> None:
        """Add several records (of one or more envs): one call per shard, in order within each shard.

        Raises:
            TypeError, ValueError, KeyError: as `add_rollout`; every valid record is stored, then the first
                error is raised.
        """
        t0 = time.perf_counter()
        groups: Dict[int, List[TensorDict]] = {}
        ids = []
        for i, td in enumerate(tds):
            if not isinstance(td, TensorDict):
                raise TypeError(f"add_rollout record {i} must be a tensordict.TensorDict, got {type(td).__name__}")
            env_id = record_env_id(td)
            if env_id is None:
                raise TypeError(
                    f"add_rollout record {i} needs the env worker's id: record.set_non_tensor('env_id', '<env id>')"
                )
            ids.append(env_id)
        new_ids = self._new_env_ids(ids)
        for env_id, td in zip(ids, tds):
            groups.setdefault(self._shard_of(env_id), []).append(td)
        try:
            self.shards.dispatch({s: ("add_rollouts", tuple(g)) for s, g in groups.items()}, [])
        except Exception:
            self._forget_rejected(new_ids)
            raise
        self._timer.add("add_rollout", time.perf_counter() - t0)

    def add_transition(self, env_ret: Any, policy_resp: Any) -> None:
        """Add one env step (an EnvRet and the PolicyResponse that answers it).

        Raises:
            TypeError: not an EnvRet and a response object (or ObjectRefs), or an env id that is not a string.
            ValueError, KeyError: an invalid step (see `add_batched_transition`); nothing of it is stored.
        """
        if not is_object_ref(env_ret) and not isinstance(env_ret, EnvRet):
            raise TypeError(f"add_transition env_ret must be an EnvRet, got {type(env_ret).__name__}")
        env_id = getattr(policy_resp, "env_id", None) if is_object_ref(env_ret) else env_ret.env_id
        if env_id is None:
            env_ret, policy_resp = resolve([env_ret, policy_resp])
            env_id = env_ret.env_id
        self.add_batched_transition(BatchedData([env_id], [env_ret]), BatchedData([env_id], [policy_resp]))

    def add_batched_transition(self, env_rets: Any, policy_resps: Any) -> None:
        """Add one step of several env workers: BatchedData (or lists) of EnvRets and PolicyResponses.

        One call per shard. Elements may be Ray ObjectRefs.

        Raises:
            TypeError: an element that is not an EnvRet / a response object, or an env id that is not a string.
            ValueError: the two batches hold different env ids, or a step is invalid: wrong shape or dtype,
                non-numeric reward or done flags, NaN or inf with ``nan_guard="raise"`` (first error raised
                after every valid step is stored; a rejected step leaves the buffer as it was).
            KeyError: a response without ``action``.
        """
        t0 = time.perf_counter()
        triples = pair_items(as_items(env_rets, "env_rets"), as_items(policy_resps, "policy_resps"))
        for env_id, env_ret, resp in triples:
            if not is_object_ref(env_ret) and not isinstance(env_ret, EnvRet):
                raise TypeError(f"env {env_id!r}: expected an EnvRet, got {type(env_ret).__name__}")
            if not is_object_ref(resp) and not hasattr(resp, "__dict__"):
                raise TypeError(f"env {env_id!r}: expected a PolicyResponse, got {type(resp).__name__}")
        new_ids = self._new_env_ids([t[0] for t in triples])
        groups: Dict[int, tuple] = {}
        for env_id, env_ret, resp in triples:
            envs, resps = groups.setdefault(self._shard_of(env_id), ([], []))
            envs.append(env_ret)
            resps.append(resp)
        calls = {s: ("add_transitions_flat", (len(es), *es, *rs)) for s, (es, rs) in groups.items()}
        try:
            self.shards.dispatch(calls, [x for _, e, r in triples for x in (e, r)])
        except Exception:
            self._forget_rejected(new_ids)
            raise
        self._timer.add("add_batched_transition", time.perf_counter() - t0)

    def add_data_async(self, item: Any) -> None:
        """Add one EnvRet or PolicyResponse arriving on its own (async rollouts)."""
        env_id = getattr(item, "env_id", None)
        if env_id is None:
            raise TypeError("add_data_async needs an item with env_id; pass ObjectRefs through add_batched_data_async")
        self.add_batched_data_async(BatchedData([env_id], [item]))

    def add_batched_data_async(self, batch: Any) -> None:
        """Add EnvRets and/or PolicyResponses (a BatchedData, refs allowed) that arrive separately."""
        items = as_items(batch, "add_batched_data_async")
        groups: Dict[int, List[Any]] = {}
        for env_id, value in items:
            groups.setdefault(self._shard_of(env_id), []).append(value)
        self.shards.dispatch({s: ("add_data_async_flat", tuple(vs)) for s, vs in groups.items()}, [v for _, v in items])

    def add_episode(
        self, episode: Union[Dict, TensorDict], num_envs: int = 1, env_id: Optional[str] = None, **kwargs: Any
    ) -> None:
        """Add whole episodes (``[T, num_envs, ...]``) to the env's shard, or to the next shard in turn."""
        if env_id is not None:
            shard = self._shard_of(env_id)
        else:
            self._require_init()
            shard = self._next_episode_shard % self.num_storages
            self._next_episode_shard += 1
        kwargs["env_id"] = env_id or "episode"
        if self.shards.handles[shard].is_remote:  # numpy travels through Ray far cheaper than torch tensors
            items = episode.items() if isinstance(episode, (dict, TensorDict)) else ()
            episode = {k: v.detach().cpu().numpy() if isinstance(v, torch.Tensor) else v for k, v in items} or episode
        self.shards.sizes[shard] = self.shards.handles[shard].call("add_episode", episode, num_envs, **kwargs)

    def extend(self, transitions: Union[Dict, TensorDict]) -> None:
        """Write ready-made transitions (``[n, ...]`` per key), split evenly over the shards, one call each.

        Transition unit only (offline data, benchmarks); with remote shards the rows travel as numpy arrays.
        """
        self._require_init()
        data = dict(transitions.items()) if isinstance(transitions, TensorDict) else dict(transitions)
        n = len(next(iter(data.values()))) if data else 0
        local = self._single_local_storage(train_workers=False)
        if local is not None:  # one local shard: the call `_dispatch` would make, made directly
            if n > 0:  # arrays of n rows are passed as they are (the same rows as their [0:n] view)
                exact = (torch.Tensor, np.ndarray)
                part = {
                    k: v if isinstance(v, exact) and v.ndim and v.shape[0] == n else v[0:n] for k, v in data.items()
                }
                with self.shards.handles[0].lock:
                    self.shards.sizes[0] = local.extend(part)
            return
        bounds = [n * i // self.num_storages for i in range(self.num_storages + 1)]
        calls = {}
        for s in range(self.num_storages):
            lo, hi = bounds[s], bounds[s + 1]
            if hi > lo:
                part = {k: v[lo:hi] for k, v in data.items()}
                if self.shards.handles[s].is_remote:
                    part = {k: v.numpy() if isinstance(v, torch.Tensor) else v for k, v in part.items()}
                calls[s] = ("extend", (part,))
        self.shards.dispatch(calls, [])

    def truncate_episodes(self, env_ids: Optional[Sequence[Any]] = None) -> None:
        """Close the episodes in progress of these envs (all known envs when None) and store them.

        Raises:
            KeyError: an env the buffer never saw (nothing is truncated).
        """
        table = self._require_init()
        if env_ids is None:
            env_ids = list(table.get_env_to_storage())
        if isinstance(env_ids, str):
            env_ids = [env_ids]
        ids = [e if isinstance(e, str) else getattr(e, "env_id", e) for e in env_ids]
        groups: Dict[int, List[str]] = {}
        for env_id in ids:
            groups.setdefault(self._shard_of(env_id, register=False), []).append(env_id)
        self.shards.dispatch({s: ("truncate_episodes", (es,)) for s, es in groups.items()}, [])

    def truncate_one_episode(self, item: Any) -> None:
        """Close the episodes in progress of one env (an env id or an object with ``env_id``)."""
        self.truncate_episodes([item])

    # ------------------------------------------------------------------ sampling

    def _single_local_storage(self, train_workers: bool = True) -> Optional[Any]:
        """The Storage when the buffer is one local shard (feeding one train worker if ``train_workers``)."""
        local = self.shards.single_local()
        if local is None or (train_workers and self.episode_table.num_train_workers != 1):
            return None
        return local

    # ------------------------------------------------------------------ state

    @property
    def size(self) -> int:
        """Stored items over all shards (as of the last call that reported sizes)."""
        return sum(self._sizes)

    def __len__(self) -> int:
        return self.size

    def get_size(self) -> int:
        """Stored items over all shards, asked from the shards."""
        self._require_init()
        self.shards.sizes[:] = self.shards.call_all("get_size")
        return sum(self.shards.sizes)

    def clear(self) -> None:
        """Clear every shard."""
        self._require_init()
        self.shards.call_all("clear")
        self.shards.sizes[:] = [0] * self.num_storages

    def rng_states(self) -> List[Dict[str, Any]]:
        """Each shard's sampler generator states (`Storage.rng_state`), for a checkpoint."""
        self._require_init()
        return list(self.shards.call_all("rng_state"))

    def set_rng_states(self, states: List[Dict[str, Any]]) -> None:
        """Restore `rng_states` (one per shard; a list of another length is ignored: another topology)."""
        self._require_init()
        if len(states) == len(self.shards.handles):
            resolve([h.submit("set_rng_state", st) for h, st in zip(self.shards.handles, states)])

    def get_data(self) -> TensorDict:
        """Every stored transition of every shard, concatenated (a copy)."""
        self._require_init()
        parts = unpack_tensordicts(self.shards.call_all("get_data", data=True))
        parts = [p for p in parts if p.batch_size[0] > 0]
        return torch.cat(parts, 0) if parts else TensorDict({}, batch_size=[0])

    def view(self) -> BufferView:
        """A read-only `BufferView` of everything stored."""
        return BufferView(self.get_data())

    def sample_rows(self, n: int = 5) -> TensorDict:
        """A few recently stored transitions (for display)."""
        self._require_init()
        parts = unpack_tensordicts(self.shards.call_all("sample_rows", n, data=True))
        parts = [p for p in parts if p.batch_size[0] > 0]
        if not parts:
            return TensorDict({}, batch_size=[0])
        rows = torch.cat(parts, 0)
        return rows[max(0, rows.batch_size[0] - n) :]

    def timing_summary(self, reset: bool = False) -> Dict[str, Any]:
        """Time per operation: the buffer's own and each shard's."""
        self._require_init()
        shards = self.shards.call_all("timing_summary", reset)
        return {"buffer": self._timer.summary(reset), "shards": shards}

    def print_timing_summary(self, reset: bool = False) -> None:
        """Log the timing summary (at INFO level)."""
        summary = self.timing_summary(reset)
        logger.info("buffer timing:\n%s", OpTimer.format(summary["buffer"]))
        for i, s in enumerate(summary["shards"]):
            logger.info("shard %d timing:\n%s", i, OpTimer.format(s))

    def stats(self) -> Dict[str, Any]:
        """A plain snapshot for views: per-shard fill, episodes stored, recent episodes, adds per second."""
        table = self._require_init()
        shard_stats = self.shards.call_all("stats")
        # Sizes are not taken from here: a view calls this from its own thread, and a snapshot it
        # wrote back could undo a newer size an add just reported (every write path keeps them).
        self.shards.stats = shard_stats
        out = merge_stats(shard_stats, table)
        out.update(unit=self.config.unit, mode=self.config.mode, sampler=self.config.sampler, remote=self.is_remote)
        out.update(clear_after_sample=self.clear_after_sample)
        out.update(shard_restarts=self.shard_restarts, lost_shards=[dict(r) for r in self.lost_shards])
        return out

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(shards={self.num_storages}, remote={self.is_remote}, size={self.size}, "
            f"capacity={self.config.capacity}/shard, unit={self.config.unit!r}, sampler={self.config.sampler!r})"
        )
