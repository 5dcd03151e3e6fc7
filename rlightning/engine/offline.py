"""`offline`: trains from a fixed dataset (no env workers collecting), evaluates online in the env.

    cfg = load_preset("pendulum_iql")                 # engine: offline, train.dataset: <a Minari dataset>
    run = lab.build(cfg); run.run(); run.show()      # the same run, panel and metrics as any other

Each iteration is ``train.updates_per_iteration`` gradient steps (the train rounds of every engine:
`TrainRounds`) on batches of ``train.batch_size`` drawn from the dataset, then a weight sync; every
``train.eval_interval`` iterations the policy plays ``train.eval_episodes`` deterministic episodes in the
run's env group (which collects nothing else). Its metrics are those of any run, plus:

- ``eval_normalized_score``: D4RL's ``100 * (return - random) / (expert - random)``, with the reference
  returns the dataset records (Minari's ``ref_min_score`` / ``ref_max_score``), when it records both;
- ``dataset_return_mean``, ``dataset_episodes``, ``dataset_steps``: the dataset's own;
- ``gradient_steps``: the updates made so far.

The dataset is loaded into the run's buffer (``buffer.type: replay``, transition unit, uniform sampling), or,
with ``train.dataset_stream``, streamed from a Ray Dataset split over the train workers
(`rlightning.datasets.ray_data`): each train worker reads its own share where it runs, and no process holds
the whole dataset. Refused with a clear error: no dataset, a missing, corrupt or empty one, one whose
observation or action space is not the env's, an on-policy buffer.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

from rlightning.engine.base_engine import BaseEngine
from rlightning.utils.logger import get_logger
from rlightning.utils.ray.handle import resolve
from rlightning.utils.registry import ENGINE

logger = get_logger(__name__)

__all__ = ["OfflineEngine"]


@ENGINE.register("offline")
class OfflineEngine(BaseEngine):
    """Offline engine: gradient steps on a dataset, online evaluation every ``train.eval_interval`` iterations."""

    name = "offline"
    last_eval: Optional[Dict[str, Any]] = None
    """The statistics of the last evaluation (None before the first)."""

    def __init__(self, config: Any, env_group: Any, policy_group: Any, buffer: Any, run_dir: Optional[str] = None):
        from rlightning.datasets.minari_io import info

        train = config.train
        if not train.dataset:
            raise ValueError(
                "engine 'offline' trains from a dataset: set train.dataset to a Minari dataset folder or id "
                "(rlightning.datasets.write / run.collect_dataset write one)"
            )
        if config.buffer.type == "rollout":
            raise ValueError(
                "engine 'offline' samples transitions from its dataset: set buffer.type=replay (got 'rollout')"
            )
        if config.buffer.unit != "transition" or config.buffer.sampler not in ("uniform", "prioritized"):
            raise ValueError(
                "engine 'offline' needs buffer.unit='transition' and buffer.sampler 'uniform' or 'prioritized' (got "
                f"unit={config.buffer.unit!r}, sampler={config.buffer.sampler!r})"
            )
        self.dataset_info = info(train.dataset)  # a missing or corrupt dataset fails here, before any worker work
        if self.dataset_info.total_steps == 0:
            raise ValueError(f"dataset {train.dataset!r} is empty: it holds no episodes")
        self.stream_reports: list = []
        self.gradient_steps = 0
        super().__init__(config, env_group, policy_group, buffer, run_dir)

    @property
    def inference_in_env_workers(self) -> bool:
        """Never: the evaluation episodes are played by the policy group's acting workers."""
        return False

    def _setup(self) -> None:
        super()._setup()
        from rlightning import datasets

        cfg, meta = self.config, self.dataset_info
        datasets.check_spaces(meta, self.env_metas[0])
        if cfg.train.dataset_stream:
            self._attach_stream()
        else:
            capacity = cfg.buffer.capacity * cfg.cluster.buffer_worker_num
            if meta.total_steps > capacity:
                raise ValueError(
                    f"dataset {meta.dataset_id!r} holds {meta.total_steps} transitions, more than the buffer's "
                    f"capacity {capacity} (buffer.capacity x buffer_worker_num); raise buffer.capacity or set "
                    "train.dataset_stream=true"
                )
            datasets.load(cfg.train.dataset, into=self.buffer)
            if not self.buffer.can_sample(cfg.train.batch_size):
                raise ValueError(
                    f"dataset {meta.dataset_id!r} ({meta.total_steps} transitions) cannot give every train worker "
                    f"a batch of train.batch_size={cfg.train.batch_size}; lower the batch size"
                )
        logger.info(
            "offline: dataset %s, %d episodes, %d transitions (%s)",
            meta.path,
            meta.total_episodes,
            meta.total_steps,
            "streamed from Ray Data" if cfg.train.dataset_stream else "in the buffer",
        )

    def _attach_stream(self) -> None:
        """Split the dataset's Ray Dataset over the train workers; each keeps a `ShardReader` of its part."""
        from rlightning.datasets.ray_data import ShardReader, minari_ray_dataset

        cfg = self.config
        workers = list(self.policy_group.train_workers)
        if len(workers) > 1 and not all(getattr(w, "is_remote", False) for w in workers):
            raise ValueError(
                "train.dataset_stream with several train workers needs them as Ray actors (cluster.remote_train="
                "true): each reads its share of the split concurrently"
            )
        ds = minari_ray_dataset(cfg.train.dataset)
        shards = ds.streaming_split(len(workers), equal=True)
        seed = cfg.buffer.seed if cfg.buffer.seed is not None else cfg.seed
        resolve(
            [
                w.submit("set_data_source", ShardReader(shard, cfg.train.batch_size, seed=seed + 1009 * i))
                for i, (w, shard) in enumerate(zip(workers, shards))
            ]
        )
        self._ray_dataset = ds

    # ------------------------------------------------------------------ phases
    def update_dataset(self, num_batches: int = 1) -> Dict[str, Any]:
        """One batch per train worker (``num_batches`` at once): from the buffer, or each from its own shard."""
        if not self.config.train.dataset_stream:
            return super().update_dataset(num_batches)
        with self._phase("update_dataset"):
            workers = self.policy_group.train_workers
            self.stream_reports = resolve([w.submit("update_dataset_from_source", num_batches) for w in workers])
        return {"batch_size": self.config.train.batch_size * num_batches * len(workers)}

    def _ready_to_train(self) -> bool:
        return True

    def iteration_phases(self) -> Dict[str, Any]:
        """Train rounds on the dataset, then a weight sync (no rollout)."""
        out: Dict[str, Any] = {}
        out.update(self.train_rounds.run())
        out.update(self.sync_weights())
        self.gradient_steps += int(self.config.train.updates_per_iteration)
        out["gradient_steps"] = self.gradient_steps
        return out

    def load(self, path: str) -> None:
        """Restore a checkpoint (`BaseEngine.load`); the gradient-step count follows the iterations restored."""
        super().load(path)
        self.gradient_steps = self.iteration * int(self.config.train.updates_per_iteration)

    def evaluate(self, num_episodes: Optional[int] = None) -> Dict[str, Any]:
        """Play deterministic episodes in the run's env group; adds ``normalized_score`` when the dataset has
        reference returns."""
        with self._phase("evaluate"):
            result = self.evaluator.evaluate(
                num_episodes or self.config.train.eval_episodes, self.iteration, group=self.env_group
            )
        meta = self.dataset_info
        if meta.ref_min_score is not None and meta.ref_max_score is not None:
            result["normalized_score"] = float(meta.normalized_score(result["return_mean"]))
        self.last_eval = result
        self.episodes += int(result["episodes"])
        return result

    def _episode_metrics(self) -> Dict[str, Any]:
        meta = self.dataset_info
        out: Dict[str, Any] = {
            "episodes": self.episodes,
            "dataset_episodes": meta.total_episodes,
            "dataset_steps": meta.total_steps,
        }
        if meta.return_mean is not None:
            out["dataset_return_mean"] = meta.return_mean
        last = self.last_eval or {}
        if "return_mean" in last:
            out["episode_return_mean"] = last["return_mean"]
            out["episode_length_mean"] = last["length_mean"]
        if "normalized_score" in last:
            out["normalized_score"] = last["normalized_score"]
        return out
