"""Helpers of the sharded buffer: creating shards, pairing items, splitting batches, joining parts and stats."""

from __future__ import annotations

import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from tensordict import TensorDict

from rlightning.buffer.utils import EpisodeTable, Storage
from rlightning.types import BatchedData, is_object_ref
from rlightning.utils.utils import InternalFlag

__all__ = [
    "as_items",
    "cat_parts",
    "create_storages",
    "interleave",
    "merge_stats",
    "pair_items",
    "shard_base_seed",
    "split_batch",
]

#: Mixed with a run's seed to give its buffer's samplers a stream of their own (not the envs' or the policy's).
_BUFFER_STREAM = 0x5EED_B0FF


def as_items(data: Any, what: str) -> List[Tuple[Any, Any]]:
    """(id, value) pairs from a BatchedData, a list of items with ``env_id``, or one item.

    Raises:
        TypeError: an ObjectRef without an id (wrap refs in a BatchedData).
    """
    if isinstance(data, BatchedData):
        return list(data.items())
    values = list(data) if isinstance(data, (list, tuple)) else [data]
    out = []
    for v in values:
        if is_object_ref(v):
            raise TypeError(f"{what}: an ObjectRef has no env id; pass refs in a BatchedData(ids, refs)")
        env_id = getattr(v, "env_id", None)
        if not isinstance(env_id, str):
            raise TypeError(f"{what}: expected items with a string env_id, got {type(v).__name__}")
        out.append((env_id, v))
    return out


def pair_items(env_items: List[Tuple[Any, Any]], resp_items: List[Tuple[Any, Any]]) -> List[Tuple[str, Any, Any]]:
    """Pair EnvRets with PolicyResponses by env id (in order when the ids line up).

    Raises:
        ValueError: the two batches do not hold the same env ids.
    """
    env_ids = [i for i, _ in env_items]
    resp_ids = [i for i, _ in resp_items]
    if env_ids == resp_ids:
        return [(i, e, r) for (i, e), (_, r) in zip(env_items, resp_items)]
    if sorted(map(str, env_ids)) != sorted(map(str, resp_ids)):
        raise ValueError(
            f"add_batched_transition: EnvRet ids {env_ids} and PolicyResponse ids {resp_ids} differ; "
            "every EnvRet needs the response that answers it"
        )
    queues: Dict[Any, List[Any]] = {}
    for i, r in resp_items:
        queues.setdefault(i, []).append(r)
    return [(i, e, queues[i].pop(0)) for i, e in env_items]


def split_batch(batch_size: int, sizes: Sequence[int], where: str) -> List[int]:
    """Split ``batch_size`` over shards in proportion to their sizes (largest remainders first).

    Raises:
        ValueError: the shards hold fewer than ``batch_size`` items together.
    """
    total = sum(sizes)
    if batch_size > total:
        raise ValueError(
            f"cannot sample batch_size={batch_size}: {where} hold {total} items together; "
            "add more data first or ask for fewer"
        )
    exact = [batch_size * s / total for s in sizes]
    shares = [int(x) for x in exact]
    order = sorted(range(len(sizes)), key=lambda j: exact[j] - shares[j], reverse=True)
    k = 0
    while sum(shares) < batch_size:
        j = order[k % len(order)]
        if shares[j] < sizes[j]:
            shares[j] += 1
        k += 1
    return shares


def _pad_time(td: TensorDict, width: int) -> TensorDict:
    """Pad an episode batch ``[B, L]`` to ``[B, width]`` by repeating the last step (mask False)."""
    b, length = td.batch_size[0], td.batch_size[1]
    if length == width:
        return td
    idx = torch.clamp(torch.arange(width), max=max(length - 1, 0))
    out = {k: v.index_select(1, idx.to(v.device)) for k, v in td.items()}
    if "mask" in out:
        out["mask"][:, length:] = False
    return TensorDict(out, batch_size=[b, width])


def interleave(parts: List[TensorDict], num_batches: int) -> List[TensorDict]:
    """Pieces to concatenate so that batch ``i`` is the ``i``-th chunk of every part, part after part.

    Each part holds ``num_batches`` equal chunks (one shard's share of each batch, drawn together).
    """
    chunks = [p.batch_size[0] // num_batches for p in parts]
    return [p[i * c : (i + 1) * c] for i in range(num_batches) for p, c in zip(parts, chunks) if c]


def cat_parts(parts: List[TensorDict]) -> TensorDict:
    """Concatenate one train worker's parts from several shards (episode batches are padded to one width)."""
    parts = [p for p in parts if p.batch_size[0] > 0 or len(list(p.keys()))]
    if not parts:
        return TensorDict({}, batch_size=[0])
    if len(parts) == 1:
        return parts[0]
    parts = [p for p in parts if p.batch_size[0] > 0] or parts[:1]
    if len(parts) == 1:
        return parts[0]
    if parts[0].batch_dims == 2:
        width = max(p.batch_size[1] for p in parts)
        parts = [_pad_time(p, width) for p in parts]
    return torch.cat(parts, dim=0)


def shard_base_seed(buffer_seed: Optional[int], run_seed: Optional[int]) -> Optional[int]:
    """The base seed of a buffer's shards (shard ``i`` uses base ``+ i``).

    ``buffer_seed`` (``BufferConfig.seed``) when set; else one derived from ``run_seed`` (the run's
    ``MainConfig.seed``) through a `numpy.random.SeedSequence` with a buffer tag, so the samplers' streams
    differ from every other use of the run's seed and from each other; None when neither is set.

    Raises:
        ValueError: a negative or non-integer seed.
    """
    for name, value in (("buffer seed", buffer_seed), ("run seed", run_seed)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0):
            raise ValueError(f"the {name} must be None or an integer >= 0, got {value!r}")
    if buffer_seed is not None:
        return int(buffer_seed)
    if run_seed is None:
        return None
    return int(np.random.SeedSequence([int(run_seed), _BUFFER_STREAM]).generate_state(1)[0])


def create_storages(
    kwargs: Dict[str, Any],
    num: int,
    remote: bool,
    options: Optional[Union[Dict[str, Any], Sequence[Dict[str, Any]]]],
    seed: Optional[int],
) -> List[Any]:
    """Build ``num`` storage shards: local `Storage` objects, or Ray actors when ``remote``.

    Actors get ``num_cpus`` 1 unless ``options`` (one dict, or one per shard) says otherwise, a
    unique name, the InternalFlag environment, and torch threads limited to their CPUs. Shard ``i``
    is seeded with ``seed + i``.
    """
    if not remote:
        return [Storage(seed=None if seed is None else seed + i, **kwargs) for i in range(num)]
    from rlightning.utils.ray.launcher import launch_ray_actor

    tag = uuid.uuid4().hex[:8]
    workers = []
    for i in range(num):
        opts: Dict[str, Any] = {"num_cpus": 1, "name": f"rlightning-storage-{tag}-{i}"}
        opts.update((options[i] if isinstance(options, (list, tuple)) else options) or {})
        runtime_env = dict(opts.get("runtime_env") or {})
        env_vars = dict(InternalFlag.get_env_vars())
        env_vars.update(runtime_env.get("env_vars") or {})
        runtime_env["env_vars"] = env_vars
        opts["runtime_env"] = runtime_env
        threads = max(1, int(float(opts.get("num_cpus") or 1)))
        shard_seed = None if seed is None else seed + i
        workers.append(launch_ray_actor(Storage, options=opts, seed=shard_seed, num_threads=threads, **kwargs))
    return workers


def merge_stats(shard_stats: List[Dict[str, Any]], table: EpisodeTable) -> Dict[str, Any]:
    """The buffer's snapshot from its shards' `Storage.stats` (plain dicts only)."""
    s2w = table.get_storage_to_train_workers()
    shards = []
    recent: List[Dict[str, Any]] = []
    for i, st in enumerate(shard_stats):
        shards.append(
            {
                "size": st["size"],
                "capacity": st["capacity"],
                "episodes": st["episodes"],
                "transitions": st["transitions"],
                "transitions_written": st["transitions_written"],
                "adds_per_sec": st["adds_per_sec"],
                "in_progress": st["in_progress"],
                "env_ids": table.get_envs_for_storage(i),
                "train_workers": s2w[i],
            }
        )
        recent.extend(st["recent_episodes"])
    recent.sort(key=lambda r: r.get("time", 0.0))
    return {
        "shards": shards,
        "size": sum(s["size"] for s in shards),
        "capacity": sum(s["capacity"] for s in shards),
        "episodes_stored": sum(s["episodes"] for s in shards),
        "transitions": sum(s["transitions"] for s in shards),
        # every transition the current shards have stored, cleared or overwritten ones included
        "transitions_written": sum(s["transitions_written"] for s in shards),
        "recent_episodes": [
            {"env_id": r["env_id"], "return": r["return"], "length": r["length"]} for r in recent[-100:]
        ],
        "adds_per_sec": sum(s["adds_per_sec"] for s in shards),
        "episode_table": table.snapshot(),
    }
