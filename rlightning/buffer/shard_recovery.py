"""Lost storage shards: finding dead shard actors, replacing them, and reporting what they held.

Part of `DataBuffer` (a mixin over its handles, sizes, episode table and config).
With ``BufferConfig.on_shard_loss="replace"`` a dead shard actor is replaced by
an empty one and ``lost_shards`` records what it held; with ``"raise"`` the
buffer raises `StorageShardLostError`. Surviving shards are never touched.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Optional, TypeVar

from rlightning.buffer.sharding import create_storages
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, is_actor_death, resolve_one

__all__ = ["ShardRecovery", "StorageShardLostError"]

logger = get_logger(__name__)

T = TypeVar("T")


class StorageShardLostError(RuntimeError):
    """A storage shard actor died and ``BufferConfig.on_shard_loss`` is ``raise``.

    Attributes:
        shard: Index of the lost shard.
        held: What it held as last reported: ``size``, ``unit``, ``episodes``, ``env_ids``, ``train_workers``.
    """

    def __init__(self, message: str, shard: int, held: Dict[str, Any]) -> None:
        super().__init__(message)
        self.shard = shard
        self.held = held


class ShardRecovery:
    """Dead shard handling for `DataBuffer` (uses its ``_handles``, ``_sizes``, ``_shard_stats``,
    ``_launch_args``, ``lost_shards``, ``_recover_lock``, ``config`` and ``_require_init``)."""

    @property
    def shard_restarts(self) -> int:
        """Storage shard actors that died and were replaced so far."""
        return len(self.lost_shards)

    def dead_shards(self, timeout: float = 60.0) -> List[int]:
        """Indices of remote shards whose actor is dead (one cheap call each; a busy shard counts as alive)."""
        futures = [(i, h.submit("get_size")) for i, h in enumerate(self._handles) if h.is_remote]
        dead = []
        for i, fut in futures:
            try:
                resolve_one(fut, timeout=timeout)
            except Exception as err:  # noqa: BLE001 - only deaths count
                if is_actor_death(err):
                    dead.append(i)
        return dead

    def _held_by(self, shard: int) -> Dict[str, Any]:
        table = self._require_init()
        last = self._shard_stats[shard] if shard < len(self._shard_stats) else {}
        return {
            "size": int(self._sizes[shard]),
            "unit": self.config.unit,
            "episodes": last.get("episodes"),
            "env_ids": table.get_envs_for_storage(shard),
            "train_workers": table.get_storage_to_train_workers()[shard],
        }

    def _replace_shard(self, shard: int, cause: BaseException, failed: Optional[WorkerHandle] = None) -> None:
        """Put an empty shard actor in place of a dead one, recording what the dead one held.

        Raises:
            StorageShardLostError: ``on_shard_loss`` is ``raise``.
        """
        with self._recover_lock:
            if failed is not None and self._handles[shard] is not failed:
                return  # another caller replaced it already
            held = self._held_by(shard)
            what = f"{held['size']} {held['unit']}s" + (
                f" ({held['episodes']} episodes as of the last stats)" if held["episodes"] is not None else ""
            )
            if self.config.on_shard_loss == "raise":
                raise StorageShardLostError(
                    f"storage shard {shard} died ({type(cause).__name__}); it held {what} of envs "
                    f"{held['env_ids']}; buffer.on_shard_loss='raise' stops the run (use 'replace' to carry on "
                    "with an empty shard)",
                    shard,
                    held,
                ) from cause
            kwargs, options = self._launch_args
            seed = self.config.seed
            if seed is not None:
                seed += shard + 7919 * (self.shard_restarts + 1)
            self._handles[shard].kill()
            if isinstance(options, (list, tuple)):
                options = options[shard]  # its own (soft) node affinity: elsewhere when that node is gone
            self._handles[shard] = WorkerHandle(create_storages(kwargs, 1, True, options, seed)[0])
            self._sizes[shard] = 0
            self._shard_stats[shard] = {}
            self.lost_shards.append(dict(held, shard=shard, cause=type(cause).__name__, time=time.time()))
            logger.warning(
                "storage shard %d died (%s); lost %s of envs %s; replaced by an empty shard",
                shard,
                type(cause).__name__,
                what,
                held["env_ids"],
            )

    def _recovering(self, fn: Callable[[], T]) -> T:
        """Run ``fn``; when a shard actor died, replace the dead shards and run it once more."""
        try:
            return fn()
        except Exception as err:  # noqa: BLE001 - re-raised unless a dead shard was replaced
            if not (self.is_remote and is_actor_death(err)):
                raise
            dead = self.dead_shards()
            if not dead:
                raise
            for i in dead:
                self._replace_shard(i, err)
        return fn()
