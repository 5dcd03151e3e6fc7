"""Buffer throughput: add and sample, local and sharded over 2 Ray actors, beside the in-process limit.

The limit is the same work on plain preallocated tensors in this process: slice
copies for adds (1000-transition chunks, wrap-around included) and one
``index_select`` per key for a sample. Local figures are medians of single
calls, ours and the limit timed alternately (robust on a busy machine); the
sharded and per-step figures are medians of single calls too.

    .venv/bin/python benchmarks/buffer.py                 # full sizes (needs ~9 GB for the image case)
    .venv/bin/python benchmarks/buffer.py --quick         # small capacities, a smoke run
    .venv/bin/python benchmarks/buffer.py --no-ray        # local figures only

Target: local add and sample at least 0.8x the limit.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rlightning.buffer import ReplayBuffer  # noqa: E402
from rlightning.buffer.utils import Storage  # noqa: E402
from rlightning.types import EnvRet, PolicyResponse  # noqa: E402
from rlightning.utils.config import BufferConfig  # noqa: E402

CHUNK = 1000
BATCH = 256
TARGET = 0.8


def cartpole_chunk(n: int) -> Dict[str, torch.Tensor]:
    """``n`` CartPole-sized transitions."""
    return {
        "obs": torch.randn(n, 4),
        "action": torch.randint(0, 2, (n,)),
        "reward": torch.ones(n),
        "next_obs": torch.randn(n, 4),
        "terminated": torch.zeros(n, dtype=torch.bool),
        "truncated": torch.zeros(n, dtype=torch.bool),
        "done": torch.zeros(n, dtype=torch.bool),
    }


def image_chunk(n: int) -> Dict[str, torch.Tensor]:
    """``n`` 84x84x3 uint8 image transitions."""
    chunk = cartpole_chunk(n)
    chunk["obs"] = torch.randint(0, 255, (n, 84, 84, 3), dtype=torch.uint8)
    chunk["next_obs"] = torch.randint(0, 255, (n, 84, 84, 3), dtype=torch.uint8)
    return chunk


class PlainLimit:
    """The in-process limit: preallocated tensors, slice copies in, index_select out."""

    def __init__(self, capacity: int, chunk: Dict[str, torch.Tensor]) -> None:
        self.capacity = capacity
        self.data = {k: torch.zeros((capacity,) + v.shape[1:], dtype=v.dtype) for k, v in chunk.items()}
        self.cursor = 0
        self.size = 0

    def add(self, chunk: Dict[str, torch.Tensor]) -> None:
        n = next(iter(chunk.values())).shape[0]
        first = min(n, self.capacity - self.cursor)
        for k, dst in self.data.items():
            dst[self.cursor : self.cursor + first].copy_(chunk[k][:first])
            if n > first:
                dst[: n - first].copy_(chunk[k][first:])
        self.cursor = (self.cursor + n) % self.capacity
        self.size = min(self.size + n, self.capacity)

    def sample(self, batch: int) -> Dict[str, torch.Tensor]:
        idx = torch.randint(self.size, (batch,))
        return {k: v.index_select(0, idx) for k, v in self.data.items()}


def median_call(fn: Callable[[], None], iters: int) -> float:
    """Median seconds of single calls of ``fn``."""
    clock = time.perf_counter
    times = []
    for _ in range(iters):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return float(np.median(times))


def paired(ours: Callable[[], None], limit: Callable[[], None], iters: int, reps: int) -> Tuple[float, float]:
    """Median seconds per call of ``ours`` and ``limit``, timed call by call in alternation.

    On a shared machine a call is now and then preempted by other processes; the
    median of single calls is what a call costs when it runs, and alternating
    lets both sides see the same conditions.
    """
    clock = time.perf_counter
    t_o: List[float] = []
    t_l: List[float] = []
    for i in range(iters * reps):
        first, second, a, b = (ours, limit, t_o, t_l) if i % 2 else (limit, ours, t_l, t_o)
        t0 = clock()
        first()
        t1 = clock()
        second()
        t2 = clock()
        a.append(t1 - t0)
        b.append(t2 - t1)
    return float(np.median(t_o)), float(np.median(t_l))


def local_case(name: str, make_chunk: Callable[[int], Dict], capacity: int, reps: int) -> Tuple[List[tuple], dict]:
    chunk = make_chunk(CHUNK)
    limit = PlainLimit(capacity, chunk)
    storage = Storage(capacity, "circular", "transition", [], "cpu")  # unseeded: the same RNG as the limit
    fill_iters = max(1, capacity // CHUNK)
    for _ in range(fill_iters):  # fill both once: sampling then reads a full buffer
        limit.add(chunk)
        storage.extend(chunk)
    add_iters = min(fill_iters, 300)
    sample_iters = 2000 if chunk["obs"].dtype != torch.uint8 else 200
    add_o, add_l = paired(lambda: storage.extend(chunk), lambda: limit.add(chunk), add_iters, reps)
    smp_o, smp_l = paired(lambda: storage.sample(BATCH), lambda: limit.sample(BATCH), sample_iters, reps)
    rates = {
        "ours_add": CHUNK / add_o,
        "limit_add": CHUNK / add_l,
        "ours_sample": 1 / smp_o,
        "limit_sample": 1 / smp_l,
    }
    rows = [
        (f"{name} local add", rates["ours_add"], rates["limit_add"], "transitions/s", True),
        (f"{name} local sample({BATCH})", rates["ours_sample"], rates["limit_sample"], "batches/s", True),
    ]
    return rows, rates


def sharded_case(name: str, make_chunk: Callable[[int], Dict], capacity: int, rates: Dict[str, float]) -> List[tuple]:
    chunk = make_chunk(CHUNK)
    buf = ReplayBuffer(config=BufferConfig(capacity=capacity // 2, seed=0), remote=True)
    buf.init([], num_storages=2, num_train_workers=1, storage_options={"num_cpus": 1})
    try:
        iters = max(1, min(capacity // CHUNK, 200))
        add_rate = CHUNK / median_call(lambda: buf.extend(chunk), iters)
        sample_iters = 300 if chunk["obs"].dtype != torch.uint8 else 50
        sample_rate = 1 / median_call(lambda: buf.sample(BATCH), sample_iters)
    finally:
        buf.close()
    return [
        (f"{name} 2 Ray shards add", add_rate, rates["limit_add"], "transitions/s", False),
        (f"{name} 2 Ray shards sample({BATCH})", sample_rate, rates["limit_sample"], "batches/s", False),
    ]


def pipeline_case(num_envs: int = 64, steps: int = 500) -> tuple:
    """The per-step path the engines use: vectorised EnvRet + PolicyResponse into episodes (informational)."""
    storage = Storage(1_000_000, "circular", "transition", [], "cpu", seed=0)
    rng = np.random.default_rng(0)
    rets, resps = [], []
    for _ in range(steps):
        done = rng.random(num_envs) < 0.02
        ret = EnvRet("bench-0", rng.normal(size=(num_envs, 4)).astype(np.float32), np.ones(num_envs, np.float32), done)
        rets.append(ret)
        resps.append(
            PolicyResponse("bench-0", action=np.zeros(num_envs, np.int64), log_prob=np.zeros(num_envs, np.float32))
        )
    pairs = iter(zip(rets, resps))
    rate = num_envs / median_call(lambda: storage.add_transition(*next(pairs)), steps)
    return (f"cartpole add_transition, {num_envs} envs/step", rate, None, "transitions/s", False)


def record_case(num_envs: int = 64, steps: int = 128, reps: int = 12) -> tuple:
    """The record path: [num_envs, steps] rollout records into `Storage.add_rollout`, beside the same rows'
    slice copies into preallocated tensors (informational: episodes span records, so most steps wait)."""
    from tensordict import TensorDict

    rng = np.random.default_rng(0)
    storage = Storage(1_000_000, "circular", "transition", [], "cpu", seed=0)

    def chunk() -> TensorDict:
        done = torch.from_numpy(rng.random((num_envs, steps)) < 0.01)
        valid = torch.ones(num_envs, steps, dtype=torch.bool)
        valid[:, 1:] = ~done[:, :-1]
        obs = torch.randn(num_envs, steps + 1, 4)
        td = TensorDict(
            {
                "obs": obs[:, :-1],
                "action": torch.zeros(num_envs, steps, dtype=torch.int64),
                "log_prob": torch.zeros(num_envs, steps),
                "valid": valid,
                "next": {
                    "obs": obs[:, 1:],
                    "reward": torch.ones(num_envs, steps),
                    "terminated": done,
                    "truncated": torch.zeros(num_envs, steps, dtype=torch.bool),
                    "done": done,
                },
            },
            batch_size=[num_envs, steps],
        )
        td.set_non_tensor("env_id", "bench-0")
        return td

    chunks = iter([chunk() for _ in range(reps + 2)])
    storage.add_rollout(next(chunks))
    rate = num_envs * steps / median_call(lambda: storage.add_rollout(next(chunks)), reps)
    return (f"cartpole add_rollout [{num_envs}, {steps}] records", rate, None, "steps/s", False)


def fmt(x: float) -> str:
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.2f}{suffix}"
    return f"{x:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small capacities (smoke run)")
    parser.add_argument("--no-ray", action="store_true", help="skip the sharded Ray figures")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per figure (best kept)")
    parser.add_argument("--cartpole-capacity", type=int, default=1_000_000)
    parser.add_argument("--image-capacity", type=int, default=100_000)
    args = parser.parse_args()
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    cart_cap = 20_000 if args.quick else args.cartpole_capacity
    img_cap = 2_000 if args.quick else args.image_capacity

    cases = (("cartpole", cartpole_chunk, cart_cap), ("image 84x84x3", image_chunk, img_cap))
    rows: List[tuple] = []
    limits: Dict[str, Dict[str, float]] = {}
    for name, make, cap in cases:  # local figures first, with no Ray processes around
        local_rows, limits[name] = local_case(name, make, cap, args.reps)
        gc.collect()  # free this case's tensors before the next one allocates
        rows += local_rows
    rows.append(pipeline_case())
    rows.append(record_case())
    if not args.no_ray:
        from rlightning.utils.ray.runtime import acquire_ray, release_ray

        try:
            acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
        except Exception as err:  # noqa: BLE001 - the local figures still stand
            print(f"(Ray did not start, sharded figures skipped: {err})")
        else:
            for name, make, cap in cases:
                rows += sharded_case(name, make, cap, limits[name])
            release_ray()
    head = f"buffer benchmark: chunks of {CHUNK}, batch {BATCH}, capacities {cart_cap} / {img_cap}, 1 torch thread"
    print(head)
    print(f"{'case':<38}{'ours':>12}{'limit':>12}{'ratio':>8}  {'unit':<15}{'target'}")
    failed = False
    table = {"columns": ["case", "ours", "limit", "ours / limit", "unit", "target"], "rows": []}
    for case, ours, limit, unit, gated in rows:
        ratio = ours / limit if limit else None
        target = f">= {TARGET}" if gated else ""
        mark = ""
        if gated and ratio < TARGET:
            mark, failed = "  BELOW TARGET", True
        ratio_s = f"{ratio:.2f}" if ratio is not None else "-"
        lim_s = fmt(limit) if limit else "-"
        print(f"{case:<38}{fmt(ours):>12}{lim_s:>12}{ratio_s:>8}  {unit:<15}{target}{mark}")
        table["rows"].append([case, fmt(ours), lim_s, ratio_s, unit, target + mark])
    from benchmarks.report import save

    save(
        "buffer",
        "Buffer add and sample, local and sharded over 2 Ray actors, beside the in-process limit",
        [{"text": head}, table],
        data={"rows": rows, "quick": args.quick},
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
