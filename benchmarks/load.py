"""Load: many env workers on logical CPUs for hundreds of iterations, memory sampled throughout.

A `cartpole_ppo` run with every part on Ray (16 env workers x 64 sub-environments
by default, a quarter of a logical CPU each) runs for hundreds of iterations.
Every few iterations it samples the Ray object store (bytes used, objects) and
the resident memory of the driver and of every worker process of this job.
After a warm-up quarter, the growth per iteration is fitted by least squares;
the run is bounded when the fitted growth over the measured span stays within
a few percent (process memory) or a few MiB (object store).

    .venv/bin/python benchmarks/load.py                        # 16 x 64, 300 iterations
    .venv/bin/python benchmarks/load.py --iterations 60 --workers 4

Prints a markdown table and saves it, with every sample, as ``benchmarks/results/<date>-<time>-load.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Collection, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")

MIB = 1024 * 1024
#: Fitted growth over the measured span allowed: process memory (fraction of its mean), object store (bytes).
RSS_GROWTH_LIMIT = 0.05
STORE_GROWTH_LIMIT = 32 * MIB


def job_processes(job_id: str, session: Optional[int] = None) -> Dict[int, str]:
    """Ray worker processes bound to ``job_id`` (``RAY_JOB_ID`` in their environment): pid -> process title.

    ``session`` keeps only processes of that session id (a cluster started in its own session).
    The raylet's pool of workers not yet bound to a job (job ``ffffffff`` in their environment) belongs
    to no driver; an actor of the job that took one of them is found in the cluster's actor table
    (its pid), when this process is connected to that cluster. Then only workers of that cluster's
    raylets count: job ids repeat across the Ray runtimes of one machine.
    """
    import psutil

    actor_pids = _job_actor_pids(job_id)
    raylets = set()
    for pid in actor_pids:
        with contextlib.suppress(psutil.Error):
            raylets.add(psutil.Process(pid).ppid())
    out: Dict[int, str] = {}
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        cmd = proc.info.get("cmdline") or []
        if not cmd or not (cmd[0].startswith("ray::") or any("default_worker.py" in c for c in cmd)):
            continue
        try:
            if session is not None and os.getsid(proc.pid) != session:
                continue
            if raylets and proc.info.get("ppid") not in raylets:
                continue
            if proc.pid in actor_pids or proc.environ().get("RAY_JOB_ID") == job_id:
                out[proc.pid] = cmd[0].strip()[:80]
        except (OSError, psutil.Error):
            continue
    return out


def _job_actor_pids(job_id: str) -> set:
    """Pids of the ALIVE actors of ``job_id`` in the actor table of the cluster this process is connected to."""
    import ray

    if not ray.is_initialized() or ray.get_runtime_context().get_job_id() != job_id:
        return set()
    from ray._private import state

    return {a["Pid"] for a in state.actors().values() if a.get("JobID") == job_id and a.get("State") == "ALIVE"}


def job_memory(job_id: str, exclude: Collection[int] = ()) -> Dict[str, float]:
    """Resident memory of this process and of the Ray worker processes bound to ``job_id``.

    Actor processes (title ``ray::Class``) and idle pool workers (``ray::IDLE``, which Ray may
    start for the job and reap later) are counted apart. ``exclude``: pids not counted (the
    actors the job already had before the measured run, such as Ray Data's own actors).
    """
    import psutil

    out: Dict[str, Any] = {"actor_rss": 0.0, "actor_processes": 0, "idle_rss": 0.0, "idle_processes": 0}
    actors: Dict[str, str] = {}
    for pid, title in job_processes(job_id).items():
        if pid in exclude:
            continue
        kind = "idle" if title == "ray::IDLE" or not title.startswith("ray::") else "actor"
        try:
            out[f"{kind}_rss"] += psutil.Process(pid).memory_info().rss
            out[f"{kind}_processes"] += 1
        except psutil.Error:
            continue
        if kind == "actor":
            actors[str(pid)] = title
    out["actors"] = actors  # pid -> title: which processes, not only how many
    out["driver_rss"] = float(psutil.Process().memory_info().rss)
    return out


def object_store() -> Dict[str, float]:
    """Bytes used and objects held by the object stores of the connected cluster."""
    import ray
    from ray._private import internal_api

    state = internal_api.get_state_from_address(ray.get_runtime_context().gcs_address)
    stats = internal_api.get_memory_info_reply(state).store_stats
    return {"store_bytes": float(stats.object_store_bytes_used), "store_objects": float(stats.num_local_objects)}


def fitted_growth(samples: List[Dict[str, Any]], key: str, warmup: float = 0.25) -> Dict[str, float]:
    """Least-squares growth of ``key`` per iteration after the warm-up share, and over the measured span."""
    kept = samples[int(len(samples) * warmup) :]
    if len(kept) < 2:
        return {"per_iteration": 0.0, "over_span": 0.0, "mean": float(kept[0][key]) if kept else 0.0}
    xs = [float(s["iteration"]) for s in kept]
    ys = [float(s[key]) for s in kept]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / var if var else 0.0
    return {"per_iteration": slope, "over_span": slope * (xs[-1] - xs[0]), "mean": my}


def verdict(samples: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Whether process memory and the object store stayed bounded (see the module docstring)."""
    out: Dict[str, Any] = {}
    for key in ("driver_rss", "actor_rss"):
        g = fitted_growth(samples, key)
        g["bounded"] = g["over_span"] <= RSS_GROWTH_LIMIT * max(g["mean"], 1.0)
        out[key] = g
    g = fitted_growth(samples, "store_bytes")
    g["bounded"] = g["over_span"] <= STORE_GROWTH_LIMIT
    out["store_bytes"] = g
    out["bounded"] = all(v["bounded"] for v in out.values() if isinstance(v, dict))
    return out


def load_config(workers: int, num_envs: int, iterations: int, rollout_steps: int, run_dir: str, overrides=()):
    from rlightning.utils.config import apply_overrides, load_preset

    return apply_overrides(
        load_preset("cartpole_ppo"),
        [
            f"env.num_workers={workers}",
            f"env.num_envs={num_envs}",
            "env.num_cpus=0.25",
            f"train.rollout_steps={rollout_steps}",
            f"train.iterations={iterations}",
            "train.target_return=null",
            "cluster.remote_env=true",
            "cluster.remote_eval=true",
            "cluster.remote_train=true",
            "cluster.remote_storage=true",
            # The per-step layout: every env step crosses Ray (env -> eval -> storage), the most traffic.
            "cluster.inference=eval_workers",
            "cluster.eval_each_cpu_num=0.25",
            "cluster.train_each_cpu_num=0.25",
            "cluster.buffer_each_cpu_num=0.25",
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={run_dir}",
            *overrides,
        ],
    )


def run_load(
    workers: int = 16,
    num_envs: int = 64,
    iterations: int = 300,
    rollout_steps: int = 4,
    sample_every: int = 5,
    run_dir: Optional[str] = None,
    overrides: Sequence[str] = (),
) -> Dict[str, Any]:
    """Run the load on the Ray runtime this process is connected to; returns samples and the verdict.

    ``overrides`` (``section.field=value``) go after the load's own settings.
    """
    import tempfile

    import ray

    from rlightning.utils.builders import build_run

    run_dir = run_dir or tempfile.mkdtemp(prefix="rl-load-")
    cfg = load_config(workers, num_envs, iterations, rollout_steps, run_dir, overrides)
    job = ray.get_runtime_context().get_job_id()
    # Actors the job had before this run (a notebook's or a test session's earlier work, e.g. Ray Data's
    # coordinator and stats actors) are not the run's: they are left out of every sample.
    before = {pid for pid, title in job_processes(job).items() if title != "ray::IDLE"}
    t_build = time.perf_counter()
    engine = build_run(cfg).engine
    build_s = time.perf_counter() - t_build
    samples: List[Dict[str, Any]] = []
    t0 = time.perf_counter()
    try:
        for it in range(1, iterations + 1):
            metrics = engine.step()
            if it % sample_every == 0 or it == 1 or it == iterations:
                row = {"iteration": it, "seconds": time.perf_counter() - t0, "env_steps": metrics["env_steps"]}
                row.update(job_memory(job, exclude=before))
                row.update(object_store())
                samples.append(row)
    finally:
        engine.close()
    elapsed = time.perf_counter() - t0
    return {
        "workers": workers,
        "num_envs": num_envs,
        "iterations": iterations,
        "rollout_steps": rollout_steps,
        "build_seconds": build_s,
        "seconds": elapsed,
        "env_steps": samples[-1]["env_steps"] if samples else 0,
        "samples": samples,
        "actors_before": len(before),
        "verdict": verdict(samples),
    }


def table(result: Dict[str, Any]) -> str:
    """A markdown summary of a `run_load` result."""
    v = result["verdict"]
    first, last = result["samples"][0], result["samples"][-1]
    lines = [
        f"Load: {result['workers']} env workers x {result['num_envs']} sub-envs, {result['iterations']} iterations "
        f"({result['env_steps']:,} env steps in {result['seconds']:.0f} s, build {result['build_seconds']:.0f} s)",
        "",
        "| measure | first sample | last sample | fitted growth / iteration | growth over span | bounded |",
        "|---|---|---|---|---|---|",
    ]
    for key, label in (
        ("driver_rss", "driver RSS"),
        ("actor_rss", "actor processes RSS"),
        ("store_bytes", "object store"),
    ):
        g = v[key]
        lines.append(
            f"| {label} | {first[key] / MIB:.0f} MiB | {last[key] / MIB:.0f} MiB | {g['per_iteration'] / 1024:.1f} KiB "
            f"| {g['over_span'] / MIB:.1f} MiB | {'yes' if g['bounded'] else 'NO'} |"
        )
    lines.append(f"| actor processes | {first['actor_processes']} | {last['actor_processes']} | | | |")
    lines.append(
        f"| idle pool workers of the job (Ray's, not judged) | {first['idle_processes']} ({first['idle_rss'] / MIB:.0f}"
        f" MiB) | {last['idle_processes']} ({last['idle_rss'] / MIB:.0f} MiB) | | | |"
    )
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--rollout-steps", type=int, default=4)
    parser.add_argument("--sample-every", type=int, default=5)
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    cpus = max(8, int(args.workers * 0.25 + 4))
    acquire_ray(num_cpus=cpus, num_gpus=0, include_dashboard=False, log_to_driver=False)
    try:
        result = run_load(args.workers, args.num_envs, args.iterations, args.rollout_steps, args.sample_every)
    finally:
        release_ray(force=True)
    text = table(result)
    print(text)
    from benchmarks.report import save

    head = f"{args.workers} env workers x {args.num_envs} sub-envs, {args.iterations} iterations, on Ray"
    save("load", "Load: many env workers for hundreds of iterations, memory sampled", f"{head}\n\n{text}", data=result)
    return 0 if result["verdict"]["bounded"] else 1


if __name__ == "__main__":
    sys.exit(main())
