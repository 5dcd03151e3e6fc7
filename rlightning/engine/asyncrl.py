"""`asyncrl`: rollout in a background thread while the learner trains and syncs (off-policy: SAC, DQN).

The rollout thread keeps stepping envs with the eval workers' current weights
and adding transitions to the buffer. Each iteration waits until
``train.rollout_steps`` new steps per env worker have arrived (the thread runs
at most two such chunks ahead, so an idle notebook does not fill the buffer
forever), then samples, trains ``train.updates_per_iteration`` times and syncs
weights, while the thread goes on collecting.

Policy lag: the learner's weights move with every update (one train round),
the acting weights only at a sync. The lag of an action is the number of
learner updates its weights are behind the learner's when its inference
starts (the measure of Sample Factory and IMPALA-style learners, in updates
rather than syncs: a sync every iteration would make a version count 0 or 1).
``train.max_policy_lag`` bounds it: before acting, the rollout thread waits
while the acting weights are more updates behind than that, until the next
sync.

On-policy learners that correct for stale weights (APPO, IMPALA: ``corrects_policy_lag``) train from a
rollout buffer: the rollout thread cuts every env's episode every ``train.rollout_steps`` steps (the
unroll length; the cut pieces are stored, marked truncated) and each iteration trains once on everything
stored since the last, acted by weights up to a few versions old. Their actions carry the acting weight
version (``policy_version``); the learner reports each batch's lag in versions (``batch_policy_lag``).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Deque, Dict, Optional

import numpy as np

from rlightning.engine.base_engine import BaseEngine
from rlightning.engine.collect import GroupActor
from rlightning.utils.logger import get_logger
from rlightning.utils.registry import ENGINE

logger = get_logger(__name__)


@ENGINE.register("asyncrl")
class AsyncRLEngine(BaseEngine):
    """Asynchronous engine: rollout, training and weight sync overlap; policy lag is measured."""

    name = "asyncrl"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._lock = threading.RLock()
        self._cv = threading.Condition()
        self._thread: Optional[threading.Thread] = None
        self._halt = threading.Event()
        self._produced = 0
        self._consumed = 0
        self._lags: Deque[int] = deque(maxlen=100_000)
        self._thread_error: Optional[BaseException] = None
        self._updates = 0  # learner updates so far
        self._synced_updates = 0  # learner updates in the weights the eval workers act with
        self._updates_of_version: Dict[int, int] = {}  # weight version -> learner updates it holds
        self._learner_acts = False
        self._since_cut = 0  # on-policy: steps since the episodes were last cut
        super().__init__(*args, **kwargs)
        self._chunk = self.config.train.rollout_steps * self.num_sub_envs
        self._max_lag = self.config.train.max_policy_lag
        # Without eval workers the learner's own weights act: nothing lags, nothing waits.
        # (With cluster.inference="env_workers" the env workers' policy copies act, synced like eval workers.)
        self._learner_acts = not self.inference_in_env_workers and not getattr(self.policy_group, "eval_workers", ())

    # ------------------------------------------------------------------ background rollout
    def _ensure_thread(self) -> None:
        if self._thread_error is not None:
            err, self._thread_error = self._thread_error, None
            raise RuntimeError(f"the rollout thread failed: {err!r}") from err
        if self._thread is None or not self._thread.is_alive():
            self._halt.clear()
            self._thread = threading.Thread(target=self._rollout_loop, name="rlightning-rollout", daemon=True)
            self._thread.start()

    def _rollout_loop(self) -> None:
        try:
            with self._lock:
                if not self.collector.started:
                    self.reset_envs()
            while not self._halt.is_set():
                with self._cv:
                    while (
                        self._produced - self._consumed >= 2 * self._chunk or self.acting_lag > self._max_lag
                    ) and not self._halt.is_set():
                        self._cv.wait(timeout=0.5)
                if self._halt.is_set():
                    break
                if self.inference_in_env_workers:
                    self._rollout_one_chunk()
                else:
                    self._rollout_one_step()
        except BaseException as err:  # noqa: BLE001 - handed to the main thread
            logger.error("rollout thread stopped: %r", err)
            self._thread_error = err
            with self._cv:
                self._cv.notify_all()

    def _rollout_one_step(self) -> None:
        """One step of every env worker through the rollout loop, the policy group acting within the lag bound
        (`_PacedActor`); the step is stored at once, under the lock (training may sample meanwhile)."""
        try:
            self.collector.collect_steps(1, actor=_PacedActor(self), lock=self._lock, bootstrap=False)
        except _Halted:
            return
        produced, cut_s = self.num_sub_envs, 0.0
        if self.on_policy:  # the unroll ends: its pieces are sampleable only once cut
            self._since_cut += 1
            produced = 0
            if self._since_cut >= self.config.train.rollout_steps:
                t0 = time.perf_counter()
                with self._lock:
                    self.buffer.truncate_episodes(self.env_ids)
                cut_s = time.perf_counter() - t0
                produced, self._since_cut = self._since_cut * self.num_sub_envs, 0
        self.timing.add("buffer_add", cut_s)
        if produced:
            with self._cv:
                self._produced += produced
                self._cv.notify_all()

    def _rollout_one_chunk(self) -> None:
        """``cluster.inference="env_workers"``: every env worker runs ``rollout_steps`` with its policy copy.

        The copies act with the weights of the last sync (a sync waits for the workers' running rollouts),
        so a chunk lags by the learner updates made since then, counted when it starts.
        """
        with self._cv:
            lag = self.acting_lag
        steps = self.collector.collect_chunks(self.config.train.rollout_steps)
        if self.on_policy:
            with self._lock:
                self.buffer.truncate_episodes(self.env_ids)
        self._lags.append(lag)
        with self._cv:
            self._produced += steps
            self._cv.notify_all()

    def _stop_thread(self) -> None:
        self._halt.set()
        with self._cv:
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None

    @property
    def acting_lag(self) -> int:
        """Learner updates the eval workers' weights are behind the learner's (0 right after a sync)."""
        return 0 if self._learner_acts else self._updates - self._synced_updates

    def _sync_policy_weights(self) -> int:
        version = super()._sync_policy_weights()
        with self._cv:
            self._updates_of_version[int(version)] = self._synced_updates = self._updates
            for old in [v for v in self._updates_of_version if v < version - 8]:
                del self._updates_of_version[old]
            self._cv.notify_all()
        return version

    # ------------------------------------------------------------------ phases
    def rollout(self) -> Dict[str, Any]:
        """Wait until one chunk of new env steps has been collected by the background thread.

        Weights are synced first when the rollout thread could not act otherwise (updates made
        outside ``step``, or an iteration that stopped between its train rounds and its sync).
        """
        if self.acting_lag > self._max_lag:
            self.sync_weights()
        self._ensure_thread()
        with self._phase("rollout"):
            with self._cv:
                while self._produced - self._consumed < self._chunk:
                    if self._thread_error is not None or self.collector.stop_requested:
                        break
                    self._cv.wait(timeout=0.5)
                new = self._produced - self._consumed
                self._consumed = self._produced
                self._cv.notify_all()
        self._ensure_thread()
        self.env_steps += new
        return {"rollout_env_steps": new}

    def update_dataset(self, num_batches: int = 1) -> Dict[str, Any]:
        """Sample one batch per train worker, or ``num_batches`` at once (under the buffer lock)."""
        with self._lock:
            return super().update_dataset(num_batches)

    def sync_weights(self) -> Dict[str, Any]:
        """Sync weights while no rollout inference is running."""
        with self._lock:
            return super().sync_weights()

    def train(self, minibatches: int = 1) -> Dict[str, Any]:
        """One learner update, or ``minibatches`` in one call (holding the lock only when eval and train share
        workers).

        One update counts once done; a call of several counts them all when it starts, so actions taken
        meanwhile record the lag they may reach (an upper bound), and ``max_policy_lag`` holds.
        """
        ahead = minibatches if minibatches > 1 else 0
        with self._cv:
            self._updates += ahead
        try:
            if self._learner_acts or self.config.cluster.is_colocated:
                with self._lock:
                    out = super().train(minibatches)
            else:
                out = super().train(minibatches)
        except BaseException:
            with self._cv:
                self._updates -= ahead
            raise
        with self._cv:
            self._updates += minibatches - ahead
        return out

    def minibatch_chunk(self, remaining: int) -> int:
        """Updates the learner may make in one call without breaking ``train.max_policy_lag``.

        The rollout thread acts while the acting weights are at most ``max_policy_lag`` updates behind; a call
        of several updates counts them when it starts (`train`), so it stops where the bound would be crossed. Once
        over the bound (the thread waits for the next sync anyway), or when the learner acts itself, the rest
        go in one call.
        """
        lag = self.acting_lag
        if self._learner_acts or lag > self._max_lag:
            return remaining
        return max(1, min(remaining, self._max_lag - lag))

    def iteration_phases(self) -> Dict[str, Any]:
        """Wait for a chunk, then ``updates_per_iteration`` x (sample, train), then sync."""
        out = self.rollout()
        if not self.collector.stop_requested and self._ready_to_train():
            out.update(self.train_rounds.run())
            out.update(self.sync_weights())
        out.update(self._lag_metrics())
        return out

    def _lag_metrics(self) -> Dict[str, Any]:
        if not self._lags:
            return {}
        lags = np.fromiter(self._lags, dtype=np.int64)
        self._lags.clear()
        return {"policy_lag": float(lags.mean()), "policy_lag_max": int(lags.max())}

    def save(self, path: Optional[str] = None, include_buffer: bool = False):
        """Checkpoint while the rollout thread is held off the buffer and weights."""
        with self._lock:
            return super().save(path, include_buffer=include_buffer)

    def close(self) -> None:
        """Stop the rollout thread, then the workers."""
        self._stop_thread()
        super().close()


class _Halted(Exception):
    """The engine stopped its rollout thread while a step waited to act."""


class _PacedActor:
    """The policy group acting for the async engine's rollout thread: under the learner's lock, only while the
    acting weights are at most ``train.max_policy_lag`` updates behind (else it waits for the next sync), each
    action's lag recorded."""

    def __init__(self, engine: AsyncRLEngine) -> None:
        self.engine = engine
        self.group = GroupActor(engine.policy_group, engine.timing)

    def act(self, ids: Any, rets: Any) -> Any:
        e = self.engine
        while True:
            with e._lock:
                learner = e._updates  # when this inference starts; train() may add one any time
                if e._learner_acts or learner - e._synced_updates <= e._max_lag:
                    resps = self.group.act(ids, rets)
                    for resp in resps:
                        if e._learner_acts:
                            e._lags.append(0)
                            continue
                        version = getattr(resp, "weight_version", None)
                        acted = e._synced_updates if version is None else e._updates_of_version.get(int(version))
                        e._lags.append(learner - (e._synced_updates if acted is None else acted))
                    return resps
            with e._cv:  # over the bound: wait for the next sync
                if e._halt.is_set():
                    raise _Halted()
                e._cv.wait(timeout=0.5)

    def values(self, ids: Any, rets: Any) -> Any:
        return self.group.values(ids, rets)
