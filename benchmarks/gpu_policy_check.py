"""GPU check: GPU train and eval policy workers, weight sync over the collective strategy.

Starts Ray with the GPUs of this machine and builds a policy group of one
train and one eval worker on GPUs: they share one GPU (0.5 each) when there is
one, and get a GPU each when there are two or more. MLPs of about 10M and 100M
parameters are synced with the ``collective`` strategy (backend nccl; NCCL
refuses two ranks on one GPU, so on a single GPU the group falls back to gloo
and prints why) and with ``object_store`` for comparison, beside a
device-to-device copy of the same bytes (the limit). Without CUDA it says so
and runs the same path on CPU with a 1M model, so the script itself is checked.

    python benchmarks/gpu_policy_check.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402

from rlightning.policy.base_policy import BasePolicy  # noqa: E402
from rlightning.policy.builder import build_policy_group  # noqa: E402
from rlightning.types import BatchedData, EnvMeta, EnvRet  # noqa: E402
from rlightning.utils.config import ClusterConfig, PolicyConfig  # noqa: E402
from rlightning.utils.placement import Placement  # noqa: E402

OBS_DIM, N_ACTIONS = 8, 4
META = EnvMeta("gpu-check-0", gym.spaces.Discrete(N_ACTIONS), gym.spaces.Box(-1, 1, (OBS_DIM,), np.float32), 64)


class SizedMLPPolicy(BasePolicy):
    """An MLP of about ``target_params`` parameters (set before ``construct_network``)."""

    target_params = 1_000_000

    def set_target_params(self, n: int) -> int:
        self.target_params = int(n)
        return self.target_params

    def construct_network(self, env_meta: EnvMeta) -> None:
        self.env_meta = env_meta
        width = max(8, int((self.target_params / 3) ** 0.5))
        layers: List[nn.Module] = [nn.Linear(OBS_DIM, width), nn.ReLU()]
        for _ in range(3):
            layers += [nn.Linear(width, width), nn.ReLU()]
        layers.append(nn.Linear(width, N_ACTIONS))
        self.net = self.register_module("net", nn.Sequential(*layers))

    def compute_actions(self, obs: np.ndarray, deterministic: bool = False) -> Dict[str, np.ndarray]:
        with torch.no_grad():
            logits = self.net(torch.as_tensor(obs, device=self.device))
        return {"action": logits.argmax(-1).cpu().numpy()}

    def train(self) -> Dict[str, float]:
        with torch.no_grad():
            for p in self.net.parameters():
                p.add_(1e-3)
        return {}


def median_time(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def copy_limit(n_params: int, device: str, reps: int) -> float:
    """Median time of one copy of ``n_params`` float32 on ``device`` (device-to-device on a GPU)."""
    src = torch.randn(n_params, device=device)
    dst = torch.empty_like(src)

    def run() -> None:
        dst.copy_(src)
        if device == "cuda":
            torch.cuda.synchronize()

    return median_time(run, reps)


def check_strategy(strategy: str, sizes: List[int], gpu_each: float, reps: int) -> List[Dict[str, Any]]:
    cluster = ClusterConfig(
        train_worker_num=1, eval_worker_num=1, train_each_gpu_num=gpu_each, eval_each_gpu_num=gpu_each
    )
    group = build_policy_group(
        SizedMLPPolicy,
        PolicyConfig(type="sized_mlp", weight_sync=strategy),
        cluster,
        "nccl",
        placement=Placement(remote_train=True, remote_eval=True),
    )
    rows = []
    try:
        comm = group.stats()["comm"]
        for n in sizes:
            for w in group.train_workers + group.eval_workers:
                w.call("set_target_params", n)
            info = group.construct_network(META, seed=0)
            group.train_workers[0].call("train")
            sync_s = median_time(group.sync_weights, reps)
            report = group.verify_eval_weight_consistency(raise_on_mismatch=False)
            obs = np.random.default_rng(0).standard_normal((64, OBS_DIM)).astype(np.float32)
            batch = BatchedData(["gpu-check-0"], [EnvRet(env_id="gpu-check-0", observation=obs)])
            rollout_s = median_time(lambda b=batch: group.rollout_batch(b), reps)
            rows.append(
                {
                    "strategy": strategy,
                    "effective": group.stats()["weight_sync"]["effective"],
                    "backend": comm.get("bcast_backend"),
                    "fallback_reason": comm.get("bcast_fallback_reason", ""),
                    "params": info["num_parameters"],
                    "mb": info["num_parameters"] * 4 / 1e6,
                    "devices": info["devices"],
                    "sync_s": sync_s,
                    "consistent": report["consistent"],
                    "rollout_64rows_s": rollout_s,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    finally:
        group.shutdown()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    cuda = torch.cuda.is_available()
    n_gpus = torch.cuda.device_count() if cuda else 0
    if cuda:
        sizes, gpu_each, device = [10_000_000, 100_000_000], (1.0 if n_gpus >= 2 else 0.5), "cuda"
        print(f"CUDA: {n_gpus} x {torch.cuda.get_device_name(0)}; train and eval workers get {gpu_each} GPU each")
    else:
        sizes, gpu_each, device = [1_000_000], 0.0, "cpu"
        print("SKIP GPU parts: CUDA is not available here; running the same path on CPU with a 1M model")
    acquire_ray(num_cpus=max(4, os.cpu_count() or 4), num_gpus=n_gpus, include_dashboard=False, log_to_driver=True)
    results: Dict[str, Any] = {"cuda": cuda, "gpus": n_gpus, "gpu_each": gpu_each, "rows": [], "errors": {}}
    try:
        limits = {n: copy_limit(n, device, args.reps) for n in sizes}
        results["copy_limit_s"] = {str(n): t for n, t in limits.items()}
        for strategy in ("collective", "object_store"):
            try:
                results["rows"] += check_strategy(strategy, sizes, gpu_each, args.reps)
            except Exception as err:  # noqa: BLE001 - report and go on with the next strategy
                results["errors"][strategy] = f"{type(err).__name__}: {err}"
                traceback.print_exc()
    finally:
        release_ray()
    print(f"\n{'strategy':>24} {'backend':>7} {'params':>8} {'MB':>6} {'sync s':>8} {'copy s':>8} {'x limit':>8}  ok")
    table: Dict[str, Any] = {
        "columns": ["strategy", "backend", "params", "MB", "sync s", "copy s", "x limit", "ok", "fallback"],
        "rows": [],
    }
    for r in results["rows"]:
        n = min(limits, key=lambda k: abs(k - r["params"]))
        name = r["strategy"] if r["effective"] == r["strategy"] else f"{r['strategy']}->{r['effective']}"
        print(
            f"{name:>24} {str(r['backend']):>7} {r['params'] / 1e6:>7.1f}M {r['mb']:>6.0f} {r['sync_s']:>8.4f} "
            f"{limits[n]:>8.5f} {r['sync_s'] / limits[n]:>7.0f}x  {r['consistent']}"
        )
        if r["fallback_reason"]:
            print(f"{'':>24} fallback: {r['fallback_reason']}")
        table["rows"].append(
            [name, str(r["backend"]), f"{r['params'] / 1e6:.1f}M", f"{r['mb']:.0f}", f"{r['sync_s']:.4f}"]
            + [f"{limits[n]:.5f}", f"{r['sync_s'] / limits[n]:.0f}x", str(r["consistent"]), r["fallback_reason"] or ""]
        )
    for strategy, err in results["errors"].items():
        print(f"{strategy}: FAILED {err}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    if table["rows"]:
        from benchmarks.report import save

        gpus = f"{n_gpus} x {torch.cuda.get_device_name(0)}" if cuda else "no CUDA: the same path on CPU, 1M model"
        errors = "; ".join(f"{s}: FAILED {e}" for s, e in results["errors"].items())
        text = f"{gpus}; {gpu_each} GPU per worker" + (f"; {errors}" if errors else "")
        save(
            "gpu_policy_check",
            "GPU train and eval workers: weight sync per strategy beside a device copy",
            [{"text": text}, table],
            data=results,
        )


if __name__ == "__main__":
    main()
