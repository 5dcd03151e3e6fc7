"""`ShardSet`: a data buffer's storage shards, their last known sizes, calls to them and their recovery.

With ``BufferConfig.on_shard_loss="replace"`` a dead shard actor is replaced by
an empty one and ``lost`` records what it held; with ``"raise"`` the set
raises `StorageShardLostError`. Surviving shards are never touched.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional, TypeVar

from rlightning.buffer.sharding import create_storages
from rlightning.types import is_object_ref
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import WorkerHandle, is_actor_death, resolve, resolve_one

__all__ = ["ShardSet", "StorageShardLostError"]

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


class ShardSet:
    """The shards of one data buffer (local `Storage` objects or Ray actors behind `WorkerHandle`s).

    Args:
        unit: What the shards count (``transition`` or ``episode``), for reports.
        on_shard_loss: ``replace`` or ``raise``.
        seed: Base seed of the shards (None: random).
        describe: ``describe(shard)`` -> the env ids and train workers a shard serves (for loss reports).
    """

    def __init__(
        self,
        unit: str,
        on_shard_loss: str,
        seed: Optional[int],
        describe: Callable[[int], Dict[str, Any]],
    ) -> None:
        self.unit = unit
        self.on_shard_loss = on_shard_loss
        self.seed = seed
        self.describe = describe
        self.handles: List[WorkerHandle] = []
        #: Last known size of each shard (every call that returns a size updates it).
        self.sizes: List[int] = []
        #: Last `Storage.stats` of each shard.
        self.stats: List[Dict[str, Any]] = []
        #: One record per shard actor that died: what it held and when.
        self.lost: List[Dict[str, Any]] = []
        self._launch: Optional[tuple] = None
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ lifecycle

    def launch(self, kwargs: Dict[str, Any], num: int, remote: bool, options: Any) -> None:
        """Create ``num`` shards (stopping any there were); ``options``: one dict for all, or one per shard."""
        self.close()
        workers = create_storages(kwargs, num, remote, options, self.seed)
        self.handles = [WorkerHandle(w) for w in workers]
        self._launch = (kwargs, options)
        self.sizes = resolve([h.submit("get_size") for h in self.handles])
        self.stats = [{} for _ in self.handles]

    def close(self) -> None:
        """Stop remote shards (local ones are dropped)."""
        for h in self.handles:
            h.kill()
        self.handles = []
        self.sizes = []

    @property
    def is_remote(self) -> bool:
        """True when the shards are Ray actors."""
        return any(h.is_remote for h in self.handles)

    def __len__(self) -> int:
        return len(self.handles)

    def single_local(self) -> Optional[Any]:
        """The Storage when there is one local shard, else None."""
        if len(self.handles) != 1 or self.handles[0].is_remote:
            return None
        return self.handles[0].worker

    # ------------------------------------------------------------------ calls

    def submit_data(self, shard: int, method: str, *args: Any) -> Any:
        """Submit a call whose results hold TensorDicts; remote shards send them as numpy (`unpack_tensordicts`)."""
        handle = self.handles[shard]
        if handle.is_remote:
            return handle.submit("call_packed", method, *args)
        return handle.submit(method, *args)

    def call_all(self, method: str, *args: Any, data: bool = False) -> List[Any]:
        """``method(*args)`` on every shard (dead shards replaced and the call repeated once)."""
        if data:
            return self.recovering(lambda: resolve([self.submit_data(s, method, *args) for s in range(len(self))]))
        return self.recovering(lambda: resolve([h.submit(method, *args) for h in self.handles]))

    def dispatch(self, calls: Dict[int, tuple], values: List[Any]) -> None:
        """Submit ``method(*args)`` per shard, resolving refs first when shards are local; update sizes.

        A shard actor that died is replaced and gets the call again; the first other error is raised
        after every shard's outcome is known.
        """
        if not self.is_remote and any(is_object_ref(v) for v in values):
            resolved = iter(resolve(values))
            lookup = {id(v): next(resolved) for v in values}
            calls = {s: (m, tuple(lookup.get(id(a), a) for a in args)) for s, (m, args) in calls.items()}
        shards = list(calls)
        handles = [self.handles[s] for s in shards]
        futures = [h.submit(m, *args) for h, (m, args) in zip(handles, calls.values())]
        try:
            results = resolve(futures)
        except Exception:  # noqa: BLE001 - find every shard's outcome, then re-raise the first error
            first = None
            for s, handle, fut in zip(shards, handles, futures):
                try:
                    self.sizes[s] = resolve_one(fut)
                except Exception as err:  # noqa: BLE001 - re-raised below unless the shard actor died
                    if not (handle.is_remote and is_actor_death(err)):
                        first = first or err
                        continue
                    self.replace(s, err, handle)  # raises with on_shard_loss="raise"
                    method, args = calls[s]  # this call's data goes to the fresh shard
                    self.sizes[s] = self.handles[s].call(method, *args)
            if first is not None:
                raise first from None
            return
        for s, size in zip(shards, results):
            self.sizes[s] = size

    # ------------------------------------------------------------------ recovery

    @property
    def restarts(self) -> int:
        """Shard actors that died and were replaced so far."""
        return len(self.lost)

    def dead_shards(self, timeout: float = 60.0) -> List[int]:
        """Indices of remote shards whose actor is dead (one cheap call each; a busy shard counts as alive)."""
        futures = [(i, h.submit("get_size")) for i, h in enumerate(self.handles) if h.is_remote]
        dead = []
        for i, fut in futures:
            try:
                resolve_one(fut, timeout=timeout)
            except Exception as err:  # noqa: BLE001 - only deaths count
                if is_actor_death(err):
                    dead.append(i)
        return dead

    def held_by(self, shard: int) -> Dict[str, Any]:
        """What a shard held as last reported."""
        last = self.stats[shard] if shard < len(self.stats) else {}
        held = {"size": int(self.sizes[shard]), "unit": self.unit, "episodes": last.get("episodes")}
        held.update(self.describe(shard))
        return held

    def replace(self, shard: int, cause: BaseException, failed: Optional[WorkerHandle] = None) -> None:
        """Put an empty shard actor in place of a dead one, recording what the dead one held.

        Raises:
            StorageShardLostError: ``on_shard_loss`` is ``raise``.
        """
        with self._lock:
            if failed is not None and self.handles[shard] is not failed:
                return  # another caller replaced it already
            held = self.held_by(shard)
            what = f"{held['size']} {held['unit']}s" + (
                f" ({held['episodes']} episodes as of the last stats)" if held["episodes"] is not None else ""
            )
            if self.on_shard_loss == "raise":
                raise StorageShardLostError(
                    f"storage shard {shard} died ({type(cause).__name__}); it held {what} of envs "
                    f"{held.get('env_ids')}; buffer.on_shard_loss='raise' stops the run (use 'replace' to carry on "
                    "with an empty shard)",
                    shard,
                    held,
                ) from cause
            kwargs, options = self._launch
            seed = self.seed
            if seed is not None:
                seed += shard + 7919 * (self.restarts + 1)
            self.handles[shard].kill()
            if isinstance(options, (list, tuple)):
                options = options[shard]  # its own (soft) node affinity: elsewhere when that node is gone
            self.handles[shard] = WorkerHandle(create_storages(kwargs, 1, True, options, seed)[0])
            self.sizes[shard] = 0
            self.stats[shard] = {}
            self.lost.append(dict(held, shard=shard, cause=type(cause).__name__, time=time.time()))
            logger.warning(
                "storage shard %d died (%s); lost %s of envs %s; replaced by an empty shard",
                shard,
                type(cause).__name__,
                what,
                held.get("env_ids"),
            )

    def recovering(self, fn: Callable[[], T]) -> T:
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
                self.replace(i, err)
        return fn()
