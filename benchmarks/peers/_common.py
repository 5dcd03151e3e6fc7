"""Shared by every side script, in every venv: thread settings, the MLP, the result protocol.

A side script prints ``@@begin <case>`` just before it starts timing a case
(setup done) and ``@@result <json>`` when the case is measured; the harness
reads the markers to watch the machine's load over exactly that span. Only the
standard library, numpy and torch are used here (all venvs have them).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
THREADS = int(os.environ["OMP_NUM_THREADS"])

CASES_SAMPLING = [(w, n) for w in (1, 2) for n in (8, 64)]
ENV = "CartPole-v1"
HIDDEN = (64, 64)


def repo_root_on_path() -> Path:
    """Put the repository root first on ``sys.path`` and on ``PYTHONPATH``; returns it.

    Worker processes a side starts (Ray's actors, a collector's workers) inherit ``PYTHONPATH`` and import
    ``benchmarks.pixel_env`` (the synthetic pixel env's entry point) from there.
    """
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    return root


def set_threads() -> None:
    """One torch thread per process (and OMP/MKL by environment, set above before torch loads)."""
    import torch

    torch.set_num_threads(THREADS)


def sampling_case(w: int, n: int) -> str:
    return f"{w}x{n}"


def parse_case(case: str) -> tuple:
    w, n = case.split("x")
    return int(w), int(n)


def args(extra: Optional[Callable[[argparse.ArgumentParser], None]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    p.add_argument("--cases", default="", help="comma-separated case names (default: all)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seconds", type=float, default=2.0, help="seconds per timed repeat")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--t0", type=float, default=None, help="wall-clock time the harness launched us (cold start)")
    p.add_argument("--max-seconds", type=float, default=0.0, help="time cap of a run to a target (PPO); 0: none")
    p.add_argument("--seed", type=int, default=1, help="seed of a run to a target (PPO: repeat r runs seed 1 + r)")
    if extra:
        extra(p)
    a = p.parse_args()
    a.cases = [c for c in a.cases.split(",") if c]
    return a


def begin(case: str) -> None:
    print(f"@@begin {case}", flush=True)


def result(case: str, values: List[float], unit: str, **extra) -> None:
    """Report a case: one value per repeat."""
    print(
        "@@result " + json.dumps({"case": case, "values": list(map(float, values)), "unit": unit, **extra}), flush=True
    )


def phase_seconds(t0: float, marks: List[float]) -> List[float]:
    """Durations between consecutive time stamps, starting from ``t0``: phase i = marks[i] - marks[i - 1]."""
    return [round(b - a, 3) for a, b in zip([t0, *marks[:-1]], marks)]


def timed_rate(run_once: Callable[[], int], seconds: float, repeats: int) -> List[float]:
    """Units per second of ``run_once`` (returns units done) over ``repeats`` windows of about ``seconds``."""
    run_once()  # warm up
    rates = []
    for _ in range(repeats):
        done = 0
        t0 = time.perf_counter()
        while True:
            done += run_once()
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
        rates.append(done / dt)
    return rates


def vector_policy_rate(case: str, env, actor, a, block: int = 128) -> None:
    """Report env steps/s of ``env`` (a gymnasium vector env) acting with ``actor`` (obs tensor -> logits).

    Each step: observations to a tensor, the forward pass, a categorical sample, the env step (the limits).
    """
    import torch

    total = env.num_envs
    obs, _ = env.reset(seed=0)
    state = {"obs": obs}

    def steps(k: int = block) -> int:
        o = state["obs"]
        for _ in range(k):
            with torch.no_grad():
                action = torch.distributions.Categorical(logits=actor(torch.as_tensor(o))).sample()
            o, _, _, _, _ = env.step(action.numpy())
        state["obs"] = o
        return k * total

    begin(case)
    result(case, timed_rate(steps, a.seconds, a.repeats), "env steps/s")
    env.close()


def info(msg: str) -> None:
    print(f"[{os.path.basename(sys.argv[0])}] {msg}", file=sys.stderr, flush=True)


def dump(obj: Dict) -> str:
    return json.dumps(obj)


# ---------------------------------------------------------------- replay buffer work
CHUNK = 1000
BATCH = 256
BUFFER_CASES = ("cartpole extend", "cartpole sample", "image extend", "image sample")


def buffer_capacity(kind: str, quick: bool) -> int:
    """1e6 CartPole transitions, 1e5 images (1e4 with --quick: 0.4 GB instead of 4.2 GB)."""
    if kind == "cartpole":
        return 1_000_000
    return 10_000 if quick else 100_000


def chunk(kind: str, n: int = CHUNK) -> Dict:
    """``n`` transitions as a dict of torch tensors: CartPole-sized, or with 84x84x3 uint8 observations."""
    import torch

    g = torch.Generator().manual_seed(0)
    out = {
        "obs": torch.randn(n, 4, generator=g),
        "action": torch.randint(0, 2, (n,), generator=g),
        "reward": torch.ones(n),
        "next_obs": torch.randn(n, 4, generator=g),
        "terminated": torch.zeros(n, dtype=torch.bool),
        "truncated": torch.zeros(n, dtype=torch.bool),
    }
    if kind == "image":
        out["obs"] = torch.randint(0, 255, (n, 84, 84, 3), dtype=torch.uint8, generator=g)
        out["next_obs"] = torch.randint(0, 255, (n, 84, 84, 3), dtype=torch.uint8, generator=g)
    return out


def run_buffer_cases(cases: List[str], quick: bool, repeats: int, make: Callable, extend: Callable, sample: Callable):
    """Time extend (chunks of CHUNK) and sample (BATCH) for a side; ``make(kind, capacity, chunk)`` builds it.

    The buffer is filled to capacity first, so extends wrap around and samples read a full buffer.
    Each repeat is a rate over many calls (extend: transitions/s; sample: batches/s).
    """
    import gc

    for kind in ("cartpole", "image"):
        wanted = [x for x in cases if x.startswith(kind)]
        if not wanted:
            continue
        cap = buffer_capacity(kind, quick)
        data = chunk(kind)
        buf = make(kind, cap, data)
        for _ in range(cap // CHUNK):
            extend(buf, data)
        for case in wanted:
            if case.endswith("extend"):
                calls = 50 if kind == "image" else 300
                fn, unit, per_call = functools.partial(extend, buf, data), "transitions/s", CHUNK
            else:
                calls = 200 if kind == "image" else 2000
                fn, unit, per_call = functools.partial(sample, buf), "batches/s", 1
            if quick:
                calls //= 4
            fn()
            begin(case)
            rates = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                for _ in range(calls):
                    fn()
                rates.append(calls * per_call / (time.perf_counter() - t0))
            result(case, rates, unit, capacity=cap)
        del buf
        gc.collect()
