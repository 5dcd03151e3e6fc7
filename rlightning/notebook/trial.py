"""One sweep trial: an ordinary rlightning run, driven by Ray Tune as a function trainable.

The trial runs in Tune's trial actor, which sits in the first bundle of the trial's placement group;
Tune makes the group capture the actors the trial starts, so the run's env, policy and storage actors
are placed in the trial's other bundles (`trial_bundles`). Every iteration reports its metrics.
Tune's function trainables report synchronously (``tune.report`` returns once Tune's controller has taken
the result and let the trial go on), so the run steps in a thread of its own, up to `AHEAD` iterations
ahead of the reports: a trial then goes at the pace of its iterations, not of the round trips.
Checkpoints are the engine's own (``engine.save`` / ``engine.load``) inside a Tune checkpoint, with a
``trial.json`` naming the trial that wrote it, so a PBT exploit (a trial starting from another trial's
checkpoint) is recorded with the donor and a digest of the weights it loaded.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlightning.utils.config import MainConfig
from rlightning.utils.logger import get_logger

logger = get_logger(__name__)

#: CPUs of the first bundle: the trial's own process (the engine's driver loop, local workers).
TRIAL_CPUS = 1.0
#: The file beside the engine's checkpoint that says which trial wrote it.
TRIAL_FILE = "trial.json"
#: Iterations a trial's run may step ahead of what Tune has taken (a stopped trial wastes at most these).
AHEAD = 2


def trial_bundles(cfg: MainConfig, trial_cpus: float = TRIAL_CPUS) -> List[Dict[str, float]]:
    """The placement group bundles of one trial: its process first, then one per Ray actor of ``cfg``."""
    from rlightning.notebook.checks import _parts

    bundles = [{"CPU": float(trial_cpus)}]
    for _, count, cpus, gpus in _parts(cfg):
        bundle = {k: float(v) for k, v in (("CPU", cpus), ("GPU", gpus)) if v}
        bundles.extend(dict(bundle) for _ in range(count) if bundle)
    return bundles


def trial_resources(base: Dict[str, Any], keys: tuple, params: Dict[str, Any]) -> Any:
    """Tune's resources of one trial: a `PlacementGroupFactory` of `trial_bundles` for its config.

    Takes the base config as a dict (Tune pickles this into its trial class: plain data keeps the
    trial actor's class light to load; the config classes are imported here, when it runs).
    """
    from ray import tune

    from rlightning.notebook.sweep_space import config_for
    from rlightning.utils.config import config_from_dict

    cfg = config_for(config_from_dict(base, source="sweep base config"), {k: params[k] for k in keys if k in params})
    return tune.PlacementGroupFactory(trial_bundles(cfg), strategy="PACK")


def weights_digest(weights: Any) -> str:
    """A SHA-1 over a (nested) dict of tensors/arrays: equal digests, equal weights."""
    import numpy as np

    h = hashlib.sha1()

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key in sorted(value, key=str):
                walk(f"{prefix}/{key}", value[key])
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(f"{prefix}/{i}", item)
        elif hasattr(value, "detach"):
            h.update(prefix.encode())
            h.update(value.detach().cpu().contiguous().numpy().tobytes())
        elif isinstance(value, np.ndarray):
            h.update(prefix.encode())
            h.update(np.ascontiguousarray(value).tobytes())

    walk("", weights)
    return h.hexdigest()


def _group_id(_self: Any = None) -> Optional[str]:
    import ray

    pg = ray.util.get_current_placement_group()
    return None if pg is None else pg.id.hex()


def actors_in_trial_group(run: Any) -> int:
    """How many of the run's env-worker actors sit in this trial's placement group (asked inside each)."""
    import ray

    from rlightning.utils.ray.handle import WorkerHandle

    mine = _group_id()
    handles = [h.worker if isinstance(h, WorkerHandle) else h for h in run.env_group.workers.values()]
    actors = [h for h in handles if WorkerHandle(h).is_remote]
    if mine is None or not actors:
        return 0
    return sum(g == mine for g in ray.get([a.__ray_call__.remote(_group_id) for a in actors], timeout=60))


def _counter(engine: Any, key: str) -> int:
    return int({"env_steps": engine.env_steps, "iteration": engine.iteration, "episodes": engine.episodes}[key])


def _report_row(metrics: Dict[str, Any], params: Dict[str, Any]) -> Dict[str, Any]:
    row = {k: v for k, v in metrics.items() if isinstance(v, (int, float, str)) and not isinstance(v, bool)}
    row.update({f"config/{k}": v for k, v in params.items() if isinstance(v, (int, float, str))})
    return row


def _restore(run: Any, checkpoint: Any, trial_id: str) -> Optional[Dict[str, Any]]:
    """Load a Tune checkpoint into ``run``; returns the exploit record when another trial wrote it."""
    with checkpoint.as_directory() as folder:
        meta = json.loads((Path(folder) / TRIAL_FILE).read_text())
        run.load(str(Path(folder) / "engine"))
    if meta["trial_id"] == trial_id:
        return None
    loaded = weights_digest(run.policy_group.get_weights())
    record = {
        "trial_id": trial_id,
        "donor": meta["trial_id"],
        "donor_iteration": meta["iteration"],
        "donor_digest": meta["digest"],
        "loaded_digest": loaded,
    }
    logger.info("trial %s exploits %s at its iteration %s", trial_id, meta["trial_id"], meta["iteration"])
    return record


def _save(run: Any, trial_id: str) -> Any:
    from ray import tune

    folder = Path(tempfile.mkdtemp(prefix="rlightning-trial-"))
    run.save(str(folder / "engine"))
    meta = {
        "trial_id": trial_id,
        "iteration": run.engine.iteration,
        "digest": weights_digest(run.policy_group.get_weights()),
    }
    (folder / TRIAL_FILE).write_text(json.dumps(meta))
    return tune.Checkpoint.from_directory(str(folder))


def run_trial(
    params: Dict[str, Any],
    base: Dict[str, Any],
    stop_key: str,
    stop_value: int,
    live: Dict[str, str],
    checkpoint_every: int,
    folder: str,
) -> None:
    """The function trainable: build the run of ``base`` with ``params``, step it to the stop counter.

    Args:
        params: The trial's sampled values by dotted config path (``seed`` included).
        base: The sweep's base config as a dict.
        stop_key: The counter that ends the trial (``env_steps``, ``iteration`` or ``episodes``).
        stop_value: Its value at the end.
        live: Dotted path -> ``run.set`` name, for the values PBT perturbs on a restored run.
        checkpoint_every: Report a checkpoint every this many iterations (and at the end).
        folder: The sweep's folder; the run writes in its trial's folder there.
    """
    import queue
    import shutil
    import threading

    from ray import tune

    from rlightning.notebook.run import Run
    from rlightning.notebook.sweep_space import config_for
    from rlightning.utils.builders import build_run
    from rlightning.utils.config import config_from_dict

    ctx = tune.get_context()
    trial_id = ctx.get_trial_id()
    cfg = config_for(config_from_dict(base, source="sweep base config"), params)
    # The trial's folder in the sweep's: Tune names a reused trial actor's working directory (elsewhere)
    # as its trial dir, with the trial folder's name.
    cfg.log.run_dir = str(Path(folder) / Path(ctx.get_trial_dir()).name)
    cfg.log.name = trial_id  # the run's folder in the trial's, and its name in MLflow / W&B
    cfg.log.progress = False
    run = Run(trial_id, cfg, build_run(cfg))
    rows: queue.Queue = queue.Queue(maxsize=max(1, AHEAD - 1))  # one queued, one being reported
    stop = threading.Event()
    stepper: Optional[threading.Thread] = None
    try:
        placed = actors_in_trial_group(run)
        exploit = None
        checkpoint = tune.get_checkpoint()
        if checkpoint is not None:
            exploit = _restore(run, checkpoint, trial_id)
            if live:  # the (perturbed) values of this trial apply on the restored learner, as run.set does
                run.set(**{name: params[key] for key, name in live.items()})

        def put(item: Any) -> bool:
            while not stop.is_set():
                try:
                    rows.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def step_ahead() -> None:
            """Step the run to the stop counter; queue each iteration's row (and checkpoint, when due)."""
            nonlocal exploit
            try:
                while not stop.is_set() and _counter(run.engine, stop_key) < stop_value:
                    row = _report_row(run.step(), params)
                    row["actors_in_trial_group"] = placed
                    if exploit is not None:
                        row["exploit"] = json.dumps(exploit)
                        exploit = None
                    done = _counter(run.engine, stop_key) >= stop_value
                    due = done or run.engine.iteration % checkpoint_every == 0
                    if not put((row, _save(run, trial_id) if due else None)):
                        return
                put(None)
            except BaseException as err:  # noqa: BLE001 - re-raised in the reporting thread
                put(err)

        stepper = threading.Thread(target=step_ahead, name=f"rlightning-trial-{trial_id}", daemon=True)
        stepper.start()
        while True:
            item = rows.get()
            if item is None:
                break
            if isinstance(item, BaseException):
                raise item
            row, ckpt = item
            if ckpt is None:
                tune.report(row)
            else:
                tune.report(row, checkpoint=ckpt)
                shutil.rmtree(ckpt.path, ignore_errors=True)  # Tune copied it to the trial's storage
    finally:
        stop.set()  # Tune stopped the trial (its report raised SystemExit), it ended or it failed
        if stepper is not None:
            stepper.join()
        while not rows.empty():  # checkpoints stepped ahead of the last report
            item = rows.get_nowait()
            if isinstance(item, tuple) and item[1] is not None:
                shutil.rmtree(item[1].path, ignore_errors=True)
        run.close(free_timeout_s=0)  # its actors' resources go back to the trial's placement group
