"""Pure helpers of the sharded buffer: grouping items per shard, splitting batches, joining parts."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import torch
from tensordict import TensorDict

from rlightning.types import BatchedData, is_object_ref

__all__ = ["as_items", "cat_parts", "pair_items", "split_batch"]


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
