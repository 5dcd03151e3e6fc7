"""Policy benchmarks: weight sync latency per strategy, and rollout_batch inference throughput.

Weight sync is timed for MLPs of about 1M, 10M and 100M parameters with each
strategy (local copy in one process, the Ray object store, a gloo broadcast),
beside the limit it chases: a plain in-memory copy of the same bytes.
Rollout throughput is measured for 1 and 2 remote eval workers, beside the
same forward pass run in this process.

    .venv/bin/python benchmarks/policy.py            # everything (100M needs ~3 GB of RAM)
    .venv/bin/python benchmarks/policy.py --quick    # 1M and 10M only, fewer repeats
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
os.environ.setdefault("OMP_NUM_THREADS", "1")

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
META = EnvMeta("bench-0", gym.spaces.Discrete(N_ACTIONS), gym.spaces.Box(-1, 1, (OBS_DIM,), np.float32), 16)


class BigMLPPolicy(BasePolicy):
    """An MLP of a chosen parameter count (``set_target_params`` before ``construct_network``)."""

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
    fn()  # warm up
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def memcpy_time(n_params: int, reps: int) -> float:
    src = torch.randn(n_params)
    dst = torch.empty_like(src)
    return median_time(lambda: dst.copy_(src), reps)


def build(strategy: str, remote: bool, cfg_kwargs=None):
    cfg = PolicyConfig(type="bench", weight_sync=strategy, **(cfg_kwargs or {}))
    cluster = ClusterConfig(train_worker_num=1, eval_worker_num=1, train_each_cpu_num=0.5, eval_each_cpu_num=0.5)
    placement = Placement(remote_train=remote, remote_eval=remote)
    return build_policy_group(BigMLPPolicy, cfg, cluster, backend="gloo", placement=placement)


def bench_sync(sizes: List[int], reps: int) -> List[Dict[str, Any]]:
    """Weight sync latency per strategy and size; returns the printed table as blocks (see benchmarks/report.py)."""
    table: Dict[str, Any] = {"columns": ["params", "MB", "strategy", "sync s", "memcpy s", "x limit", "ok"], "rows": []}
    print("\n== weight sync latency: train rank 0 -> 1 eval worker (median of", reps, "syncs) ==")
    print(f"{'params':>8} {'MB':>7} {'strategy':>13} {'sync s':>9} {'memcpy s':>9} {'x limit':>8}  ok")
    limits = {n: memcpy_time(n, reps) for n in sizes}
    for strategy, remote in (("colocated", False), ("object_store", True), ("collective", True)):
        group = build(strategy, remote)
        try:
            for n in sizes:
                for w in group.train_workers + group.eval_workers:
                    w.call("set_target_params", n)
                info = group.construct_network(META, seed=0)
                effective = group.stats()["weight_sync"]["effective"]
                t = median_time(group.sync_weights, reps)
                ok = group.verify_eval_weight_consistency(raise_on_mismatch=False)["consistent"]
                mb = info["num_parameters"] * 4 / 1e6
                name = effective if effective == strategy else f"{strategy}->{effective}"
                print(
                    f"{n / 1e6:>7.0f}M {mb:>7.0f} {name:>13} {t:>9.4f} {limits[n]:>9.4f} {t / limits[n]:>7.1f}x  {ok}",
                    flush=True,
                )
                row = [f"{n / 1e6:.0f}M", f"{mb:.0f}", name, f"{t:.4f}", f"{limits[n]:.4f}", f"{t / limits[n]:.1f}x"]
                table["rows"].append([*row, str(ok)])
        finally:
            group.shutdown()
    return [{"text": f"Weight sync latency: train rank 0 -> 1 eval worker (median of {reps} syncs)"}, table]


def bench_rollout(calls: int) -> List[Dict[str, Any]]:
    """rollout_batch throughput beside the in-process forward pass; returns the printed table as blocks."""
    print("\n== rollout_batch throughput: 8 env workers x 16 envs per call, PPO 64x64 on CartPole spaces ==")
    meta = EnvMeta("CartPole-v1-0", gym.spaces.Discrete(2), gym.spaces.Box(-5, 5, (4,), np.float32), 16)
    rng = np.random.default_rng(0)
    rets = [EnvRet(env_id=f"e{i}", observation=rng.standard_normal((16, 4)).astype(np.float32)) for i in range(8)]
    batch = BatchedData([r.env_id for r in rets], rets)
    rows = 8 * 16

    local = build_policy_group("ppo", PolicyConfig(), ClusterConfig(eval_worker_num=1), placement=Placement())
    local.construct_network(meta, seed=0)
    t_local = median_time(lambda: local.rollout_batch(batch), calls)
    print(f"{'eval workers':>14} {'calls/s':>9} {'rows/s':>10} {'x in-process':>13}")
    print(f"{'in-process':>14} {1 / t_local:>9.0f} {rows / t_local:>10.0f} {1.0:>12.2f}x  (the limit)")
    table = {
        "columns": ["eval workers", "calls/s", "rows/s", "x in-process"],
        "rows": [["in-process (the limit)", f"{1 / t_local:.0f}", f"{rows / t_local:.0f}", "1.00x"]],
    }
    for n_eval in (1, 2):
        cluster = ClusterConfig(eval_worker_num=n_eval, eval_each_cpu_num=0.5)
        group = build_policy_group("ppo", PolicyConfig(), cluster, placement=Placement(remote_eval=True))
        try:
            group.construct_network(meta, seed=0)
            t = median_time(lambda g=group: g.rollout_batch(batch), calls)
            print(f"{n_eval:>14} {1 / t:>9.0f} {rows / t:>10.0f} {t_local / t:>12.2f}x", flush=True)
            table["rows"].append([str(n_eval), f"{1 / t:.0f}", f"{rows / t:.0f}", f"{t_local / t:.2f}x"])
        finally:
            group.shutdown()
    head = "rollout_batch throughput: 8 env workers x 16 envs per call, PPO 64x64 on CartPole spaces"
    return [{"text": head}, table]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1M and 10M parameters only, fewer repeats")
    parser.add_argument("--skip-sync", action="store_true")
    parser.add_argument("--skip-rollout", action="store_true")
    args = parser.parse_args()
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    acquire_ray(num_cpus=8, num_gpus=0, include_dashboard=False, log_to_driver=False)
    torch.set_num_threads(1)
    print(f"cpus={os.cpu_count()} torch={torch.__version__} threads=1 (driver); actors 0.5 CPU each")
    blocks: List[Dict[str, Any]] = []
    try:
        if not args.skip_sync:
            sizes = [1_000_000, 10_000_000] if args.quick else [1_000_000, 10_000_000, 100_000_000]
            blocks += bench_sync(sizes, reps=3 if args.quick else 5)
        if not args.skip_rollout:
            blocks += bench_rollout(calls=20 if args.quick else 100)
    finally:
        release_ray()
    if blocks:
        from benchmarks.report import save

        save("policy", "Weight sync latency per strategy, and rollout_batch inference throughput", blocks)


if __name__ == "__main__":
    main()
