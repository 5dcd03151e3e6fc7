"""`BaseEngine`: the phases of one training iteration, each callable from a notebook cell.

engine.rollout()          # env step <-> policy inference, transitions into the buffer
engine.update_dataset()   # one buffer sample per train worker
engine.train()            # data-parallel update
engine.sync_weights()     # train -> eval workers
engine.step()             # all four, timed; returns the iteration's metrics
engine.run(iterations=20) # with a progress bar; Ctrl-C stops between phases
"""

from __future__ import annotations

import contextlib
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional

import numpy as np
import torch

from rlightning.engine.collect import Collector
from rlightning.engine.engine_checkpoints import (
    checkpoint_state,
    newest_complete,
    periodic_checkpoint,
    restore_checkpoint,
    write_checkpoint,
)
from rlightning.engine.evaluation import Evaluator
from rlightning.engine.metrics import MetricsLog
from rlightning.engine.timing import Timing
from rlightning.engine.train_rounds import TrainRounds
from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger
from rlightning.utils.tracking import open_trackers

logger = get_logger(__name__)

Callback = Callable[["BaseEngine", Dict[str, Any]], Optional[bool]]


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


class BaseEngine:
    """Drives env group, policy group and buffer through the phases of an iteration.

    Args:
        config: The run's MainConfig.
        env_group: An `EnvGroup` (not yet initialised).
        policy_group: A `PolicyGroup` from ``build_policy_group``.
        buffer: A `DataBuffer` from ``build_data_buffer`` (not yet initialised).
        run_dir: Where metrics and checkpoints go (None: ``config.log.run_dir/<name>``).
    """

    name = "base"

    def __init__(
        self, config: MainConfig, env_group: Any, policy_group: Any, buffer: Any, run_dir: Optional[str] = None
    ):
        self.config = config
        # On-policy (PPO): a rollout buffer, consumed whole each iteration, episodes cut at rollout ends.
        self.on_policy = config.buffer.type == "rollout"
        self.env_group = env_group
        self.policy_group = policy_group
        self.buffer = buffer
        self.timing = Timing()
        self.iteration = 0
        self.env_steps = 0
        self.episodes = 0
        self.phase = "idle"
        self.last_metrics: Dict[str, Any] = {}
        self.last_checkpoint: Optional[Path] = None
        self._closed = False
        self.collector: Optional[Collector] = None
        self.env_weight_sync: Optional[Any] = None  # EnvWorkerSync when the env workers act
        self.evaluator = Evaluator(config, policy_group)
        #: Called as ``hook(engine)`` at the start of each iteration; a dict returned joins its metrics.
        self.step_hooks: List[Callable[[BaseEngine], Optional[Dict[str, Any]]]] = []
        self.run_dir = (
            Path(run_dir)
            if run_dir
            else Path(config.log.run_dir) / (config.log.name or f"{config.engine}-{time.strftime('%Y%m%d-%H%M%S')}")
        )
        self.metrics = MetricsLog(
            self.run_dir,
            jsonl=config.log.jsonl,
            tensorboard=config.log.tensorboard,
            trackers=open_trackers(config, self.run_dir),  # log.mlflow, log.wandb
        )
        seed_everything(config.seed)
        self._setup()

    # ------------------------------------------------------------------ wiring
    def _setup(self) -> None:
        cfg = self.config
        self.env_metas = self.env_group.init()
        self.env_ids = [m.env_id for m in self.env_metas]
        self.num_sub_envs = sum(int(m.num_envs or 1) for m in self.env_metas)
        self.policy_group.construct_network(self.env_metas[0], seed=self.config.seed)
        self.collector = Collector(
            self.env_group,
            self.policy_group,
            self.buffer,
            self.timing,
            self.env_ids,
            self.num_sub_envs,
            in_env_workers=self.inference_in_env_workers,
        )
        self.train_rounds = TrainRounds(self)  # the train phase's updates (rlightning.engine.train_rounds)
        if self.inference_in_env_workers:
            from rlightning.engine.acting import EnvWorkerSync
            from rlightning.policy.multi_agent import policy_class_for

            policy_cls = policy_class_for(cfg)  # MultiAgentPolicy for a multi-agent env
            self.env_group.attach_policy(policy_cls.acting_copy_factory(cfg.policy, self.env_metas[0], cfg.seed))
            self.env_weight_sync = EnvWorkerSync(
                self.env_group, self.policy_group, cfg.policy.weight_sync, is_colocated=cfg.cluster.is_colocated
            )
        annealed = cfg.policy.optim.anneal_lr or getattr(cfg.policy, "anneal_clip", False)
        if annealed and hasattr(self.policy_group, "set_schedule"):
            self.policy_group.set_schedule(cfg.train.iterations, cfg.train.total_env_steps)
        from rlightning.utils.ray.placement_groups import buffer_placement

        self.buffer.init(
            self.env_metas,
            self.env_ids,
            num_storages=cfg.cluster.buffer_worker_num,
            num_train_workers=cfg.cluster.train_worker_num,
            run_seed=cfg.seed,  # the samplers' seeds when buffer.seed is unset
            **buffer_placement(cfg, self.env_group, self.policy_group),
        )
        self._sync_policy_weights()

    def _sync_policy_weights(self) -> int:
        """Train -> the acting policy: eval workers, or the env workers' policy copies when they act."""
        version = self.policy_group.sync_weights()
        if self.env_weight_sync is not None:
            self.env_weight_sync.push(version)
        return version

    @property
    def stop_requested(self) -> bool:
        """True once `stop` was called, until the next `run`."""
        return self.collector.stop_requested

    # ------------------------------------------------------------------ phases
    def reset_envs(self) -> None:
        """Reset every env (seeded from the config and the iteration) and drop episodes in progress."""
        self.collector.reset(seed=self._reset_seed())

    def _reset_seed(self) -> int:
        return self.config.seed + 7919 * self.iteration

    @property
    def inference_in_env_workers(self) -> bool:
        """True when the env workers act with their own policy copies (``cluster.inference="env_workers"``)."""
        return self.config.cluster.inference == "env_workers"

    def _collect(self, num_steps: int, truncate_at_end: bool) -> int:
        """Step every env worker ``num_steps`` times, adding transitions to the buffer; returns env steps."""
        steps = self.collector.collect(num_steps, seed=self._reset_seed())
        if truncate_at_end:
            self.buffer.truncate_episodes(self.env_ids)
        return steps

    def rollout(self) -> Dict[str, Any]:
        """Collect ``train.rollout_steps`` steps from every env worker into the buffer."""
        with self._phase("rollout"):
            cut = self.on_policy or self.config.train.store_open_episodes
            steps = self._collect(self.config.train.rollout_steps, truncate_at_end=cut)
        self.env_steps += steps
        return {"rollout_env_steps": steps}

    def update_dataset(self, num_batches: int = 1) -> Dict[str, Any]:
        """Sample one batch per train worker (``num_batches`` at once: uniform sampler) and hand it over."""
        with self._phase("update_dataset"):
            if num_batches == 1:
                batches = self.buffer.sample(self.config.train.batch_size)
            else:
                batches = self.buffer.sample(self.config.train.batch_size, num_batches=num_batches)
            self.policy_group.update_dataset(batches)
        return {"batch_size": int(sum(len(b) for b in batches))}

    def train(self, minibatches: int = 1) -> Dict[str, Any]:
        """Run the train workers' update (then write their new replay priorities back); returns their metrics.

        ``minibatches``: that many updates, each on the next batch of what `update_dataset` handed over
        (`BasePolicy.train_minibatches`); the metrics are their means.
        """
        with self._phase("train"):
            if minibatches == 1:
                metrics = self.policy_group.train() or {}
            else:
                metrics = self.policy_group.train_minibatches(minibatches) or {}
            self._write_back_priorities()
        return dict(metrics)

    def _write_back_priorities(self) -> None:
        """Prioritized replay: hand each train worker's new priorities to the buffer's shards."""
        if self.config.buffer.sampler != "prioritized" or not hasattr(self.policy_group, "priority_updates"):
            return
        for update in self.policy_group.priority_updates():
            if update is not None:
                self.buffer.update_priorities(update["index"], update["priority"], shard=update["shard"])

    def sync_weights(self) -> Dict[str, Any]:
        """Copy train weights to the eval workers."""
        with self._phase("sync_weights"):
            self._sync_policy_weights()
        return {"weight_version": self.policy_group.weight_version}

    def evaluate(self, num_episodes: Optional[int] = None) -> Dict[str, Any]:
        """Play ``num_episodes`` with deterministic actions on a separate env; returns their statistics."""
        with self._phase("evaluate"):
            result = self.evaluator.evaluate(num_episodes or self.config.train.eval_episodes, self.iteration)
        return result

    def _ready_to_train(self) -> bool:
        if self.on_policy:  # nothing stored when every env worker's rollout was lost (died, hung): no update
            return int(getattr(self.buffer, "size", 1)) > 0
        if self.env_steps < self.config.train.learning_starts:
            return False
        can_sample = getattr(self.buffer, "can_sample", None)
        if can_sample is not None:  # every train worker's shards must hold a batch (a replaced shard starts empty)
            return bool(can_sample(self.config.train.batch_size))
        return int(self.buffer.size) >= self.config.train.batch_size

    def minibatch_chunk(self, remaining: int) -> int:
        """Updates the next (update_dataset, train) pair may make at once, of the ``remaining`` ones."""
        return remaining

    def iteration_phases(self) -> Dict[str, Any]:
        """Rollout, then (when enough data is stored) train rounds and a weight sync."""
        out: Dict[str, Any] = {}
        out.update(self.rollout())
        if self.collector.stop_requested or not self._ready_to_train():
            return out
        out.update(self.train_rounds.run())
        out.update(self.sync_weights())
        return out

    def step(self) -> Dict[str, Any]:
        """Run one iteration and return its metrics."""
        self._check_open()
        hooked: Dict[str, Any] = {}
        for hook in list(self.step_hooks):
            hooked.update(hook(self) or {})
        self.timing.begin_iteration(self.iteration)
        steps_before = self.env_steps
        t0 = time.perf_counter()
        try:
            metrics = {**hooked, **self.iteration_phases()}
            interval = self.config.train.eval_interval
            if interval and (self.iteration + 1) % interval == 0 and not self.collector.stop_requested:
                metrics.update({f"eval_{k}": v for k, v in self.evaluate().items()})
        except Exception as err:  # noqa: BLE001 - re-raised, as a WorkerLostError when a train worker died
            self._raise_if_train_worker_lost(err)
            raise
        elapsed = time.perf_counter() - t0
        self.iteration += 1
        new_steps = self.env_steps - steps_before
        self.timing.end_iteration(env_steps=new_steps)
        metrics.update(self._episode_metrics())
        metrics.update(
            iteration=self.iteration,
            env_steps=self.env_steps,
            env_steps_per_sec=new_steps / elapsed if elapsed > 0 else 0.0,
            iteration_time=elapsed,
        )
        self.last_metrics = self.metrics.log(metrics)
        every = self.config.train.checkpoint_interval
        if every and self.iteration % every == 0:
            self._periodic_checkpoint()
        self.phase = "idle"
        return self.last_metrics

    def _raise_if_train_worker_lost(self, err: BaseException) -> None:
        """A dead train worker ends the run (its optimizer state is gone): say so, naming the last checkpoint."""
        from rlightning.policy.policy_group import WorkerLostError
        from rlightning.utils.ray.handle import is_actor_death

        if isinstance(err, WorkerLostError) or not is_actor_death(err):
            return
        finder = getattr(self.policy_group, "dead_workers", None)
        dead = finder("train") if finder is not None else []
        if not dead:
            return
        self.phase = "idle"
        ckpt = str(self.last_checkpoint) if self.last_checkpoint is not None else None
        if ckpt:
            where = (
                f"the last checkpoint is {ckpt} (iteration {self.iteration}); build the run again and call "
                f"engine.load({ckpt!r}) (or Run.load) to continue its counters and return curve"
            )
        else:
            where = "no checkpoint was saved in this run; set train.checkpoint_interval to save one every N iterations"
        raise WorkerLostError(
            f"train worker {dead[0]} died during iteration {self.iteration + 1}; the run stops (its optimizer "
            f"state is gone). {where}",
            "train",
            dead[0],
            checkpoint=ckpt,
        ) from err

    def restart_counts(self, env_stats: Optional[Dict[str, Any]] = None) -> Dict[str, int]:
        """Workers restarted so far (env workers, eval policy actors, storage shards) and env errors.

        ``env_restarts`` counts every recreated env worker (its actor died or its env raised);
        ``env_errors`` the exceptions raised by the envs' own code; ``env_timeouts`` the calls that took longer
        than ``env.step_timeout_s``.
        """
        if env_stats is None:
            env_stats = self.env_group.stats() if hasattr(self.env_group, "stats") else {}
        env = int(env_stats.get("total_restarts", 0))
        pstats = self.policy_group.stats() if hasattr(self.policy_group, "stats") else {}
        return {
            "env_restarts": env,
            "env_errors": int(env_stats.get("total_env_errors", 0)),
            "env_timeouts": int(env_stats.get("total_timeouts", 0)),
            "eval_restarts": int(pstats.get("total_eval_restarts", 0)),
            "storage_restarts": int(getattr(self.buffer, "shard_restarts", 0)),
        }

    def _episode_metrics(self) -> Dict[str, Any]:
        stats = self.env_group.stats()
        window = self.config.train.return_window
        returns = list(stats.get("recent_returns", []))[-window:]
        lengths = list(stats.get("recent_lengths", []))[-window:]
        self.episodes = int(stats.get("episodes", self.episodes))
        out: Dict[str, Any] = {"episodes": self.episodes, **self.restart_counts(stats)}
        if returns:
            out["episode_return_mean"] = float(np.mean(returns))
            out["episode_return_last"] = float(returns[-1])
        if lengths:
            out["episode_length_mean"] = float(np.mean(lengths))
        for agent, agent_returns in (stats.get("recent_agent_returns") or {}).items():
            if agent_returns:  # multi-agent envs: each agent's own return
                out[f"agent_return_mean/{agent}"] = float(np.mean(agent_returns[-window:]))
        return out

    # ------------------------------------------------------------------ run loop
    def run(
        self,
        iterations: Optional[int] = None,
        env_steps: Optional[int] = None,
        until_return: Optional[float] = None,
        callbacks: Iterable[Callback] = (),
        progress: Optional[bool] = None,
    ) -> List[Dict[str, Any]]:
        """Run iterations until a limit is reached; returns the metrics of each iteration.

        Args:
            iterations: Iterations to run now (default ``train.iterations`` minus those done).
            env_steps: Stop once the run's total env steps reach this.
            until_return: Stop once the recent mean episode return reaches this.
            callbacks: Called as ``cb(engine, metrics)`` after each iteration; returning False stops.
            progress: Show a tqdm progress bar (default ``log.progress``).
        """
        cfg = self.config
        if iterations is None:
            iterations = max(0, cfg.train.iterations - self.iteration)
        if env_steps is None:
            env_steps = cfg.train.total_env_steps
        if until_return is None:
            until_return = cfg.train.target_return
        show = cfg.log.progress if progress is None else progress
        bar = None
        if show:
            from tqdm.auto import tqdm

            bar = tqdm(total=iterations, desc=f"{self.name}", unit="it", leave=True)
        history: List[Dict[str, Any]] = []
        self.collector.clear_stop()
        try:
            with self._sigint_stops_between_phases():
                for _ in range(iterations):
                    metrics = self.step()
                    history.append(metrics)
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(_postfix(metrics), refresh=False)
                    stop = any(cb(self, metrics) is False for cb in callbacks)
                    ret = metrics.get("episode_return_mean")
                    if until_return is not None and ret is not None and ret >= until_return:
                        logger.info("target return %.1f reached (%.1f)", until_return, ret)
                        break
                    if env_steps is not None and self.env_steps >= env_steps:
                        break
                    if stop or self.collector.stop_requested:
                        break
        finally:
            if bar is not None:
                bar.close()
            self.phase = "idle"
        return history

    def stop(self) -> None:
        """Ask a running ``run()`` to stop after the current phase."""
        self.collector.request_stop()

    @contextlib.contextmanager
    def _sigint_stops_between_phases(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.getsignal(signal.SIGINT)

        def handler(signum, frame):
            if self.collector.stop_requested:
                signal.signal(signal.SIGINT, previous)
                raise KeyboardInterrupt
            logger.warning("interrupt: stopping after the current phase (interrupt again to abort now)")
            self.collector.request_stop()

        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # not allowed here (e.g. some embedded interpreters)
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    @contextlib.contextmanager
    def _phase(self, name: str):
        self.phase = name
        try:
            with self.timing.phase(name):
                yield
        finally:
            self.phase = "idle"

    # ------------------------------------------------------------------ checkpoints (engine_checkpoints)
    def state(self) -> Dict[str, Any]:
        """The counters, metric history and env statistics a checkpoint holds."""
        return checkpoint_state(self)

    def _periodic_checkpoint(self) -> None:
        """``train.checkpoint_interval``: save, prune to ``train.keep_checkpoints``, reset the envs if asked."""
        periodic_checkpoint(self)

    def save(self, path: Optional[str] = None, include_buffer: bool = False) -> Path:
        """Write a checkpoint folder (data only, atomically: complete or absent) and return its path."""
        target = Path(path) if path is not None else self.run_dir / "checkpoints" / f"iter_{self.iteration:06d}"
        write_checkpoint(self, target, include_buffer)
        self.last_checkpoint = target
        logger.info("checkpoint saved to %s", target)
        return target

    def load(self, path: str) -> None:
        """Restore counters, metric history, env statistics, RNG, policy (weights, optimizers, schedules) and
        buffer (when saved) from a checkpoint folder."""
        restore_checkpoint(self, Path(path))
        self.last_checkpoint = Path(path)
        self.collector.forget()

    def resume(self, run_dir: str) -> Path:
        """Continue from the newest complete checkpoint of ``run_dir`` (its ``checkpoints/iter_*`` folders;
        incomplete ones are logged and skipped); returns that checkpoint's folder.

        Raises:
            FileNotFoundError: ``run_dir`` holds no complete checkpoint.
        """
        path = newest_complete(run_dir)
        self.load(str(path))
        logger.info("resumed from %s (iteration %d)", path, self.iteration)
        return path

    # ------------------------------------------------------------------ lifecycle
    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self.name} engine is closed; build a new one")

    def close(self) -> None:
        """Stop the env workers, policy workers and storage actors this engine drives."""
        if self._closed:
            return
        self._closed = True
        self.stop()
        for part in (self.env_group, self.policy_group, self.buffer):
            if _actors_gone_with_ray(part):  # a call now would start a new runtime and not find the actors
                logger.info("%s: the Ray runtime was shut down first; its actors went with it", type(part).__name__)
                continue
            closer = getattr(part, "close", None)
            if closer is not None:
                try:
                    closer()
                except Exception as err:  # noqa: BLE001 - close what can be closed
                    logger.warning("closing %s failed: %s", type(part).__name__, err)
        self.evaluator.close()
        self.metrics.close()

    def __enter__(self) -> BaseEngine:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(iteration={self.iteration}, env_steps={self.env_steps}, "
            f"envs={len(getattr(self, 'env_ids', []))}, phase={self.phase!r})"
        )


def _actors_gone_with_ray(part: Any) -> bool:
    """True when ``part`` has Ray actors and the Ray runtime they lived in was shut down already."""
    ray = sys.modules.get("ray")
    if ray is None or ray.is_initialized():
        return False
    if getattr(part, "is_remote", False):
        return True
    workers = [*(getattr(part, "train_workers", None) or []), *(getattr(part, "eval_workers", None) or [])]
    return any(getattr(w, "is_remote", False) for w in workers)


def _postfix(metrics: Dict[str, Any]) -> Dict[str, str]:
    out = {}
    for key, short in (("episode_return_mean", "return"), ("env_steps_per_sec", "steps/s"), ("policy_lag", "lag")):
        value = metrics.get(key)
        if isinstance(value, (int, float)):
            out[short] = f"{value:.1f}"
    return out
