"""In-process ratios for A/B runs of two commits on a loaded machine: rlightning against its limit, interleaved.

Run it once per tree, alternating trees (``PYTHONPATH`` names the tree whose rlightning is measured)::

    PYTHONPATH=<tree> python benchmarks/ab_inprocess.py sampling --label new   # local engine.rollout / limit
    PYTHONPATH=<tree> python benchmarks/ab_inprocess.py buffer --label new     # DataBuffer.sample(256) / limit

``sampling``: the engine's rollout phase with ``peers/rlightning_sampling.py``'s local config
(cases 1x8, 2x64) against ``make_vec`` of all sub-envs + the MLP + a categorical draw, in
alternating windows. ``buffer``: ``DataBuffer.sample(256)`` on a full buffer against one
``randint`` + ``index_select`` per key on a filled copy of the same tensors. Each prints the
median of the per-round ratios (ours / limit); compare the ratios of the two trees, not rates.
``--clock cpu`` counts ``sampling``'s rates per CPU second of the process instead of per
wall-clock second (both sides are single-threaded; other processes' load inflates CPU time least).

``raystep`` is ``sampling``'s interleaving for the per-step layout on Ray (``peers/rlightning_sampling.py
--mode ray-step``: env workers as Ray actors, the eval worker acting in this process every step) against
its Ray floor (``benchmarks/ray_floor.py``: the same calls to actors that do no env work), both on one Ray
runtime, in alternating wall-clock windows; it prints the median of the per-round ratios::

    PYTHONPATH=<tree> python benchmarks/ab_inprocess.py raystep --cases 1x8,2x64 --seconds 2 --rounds 7

``transition`` loads the rlightning of several trees into one process (each tree's modules
imported apart) and times ``Storage.add_transition`` of each in alternating windows::

    python benchmarks/ab_inprocess.py transition --trees <old tree>,<new tree> --envs 1,64

It prints each tree's median microseconds per call and the median per-round ratio to the
first tree (CartPole-like steps, a 2 % chance per step that an episode ends, values in the
responses, the default post-process). ``rollout`` does the same for ``Storage.add_rollout`` of
``[N, T]`` records laid out as the env worker lays them out (``obs`` and ``next.obs`` views of
one ``[N, T + 1]`` array; trees that have ``add_rollout``)::

    python benchmarks/ab_inprocess.py rollout --trees <old tree>,<new tree> --kinds cartpole,image

``collect`` loads the rlightning of several trees into one process and times the local rollout itself
(``RolloutWorker.collect`` of one worker, the lock-step collect of several: ``local_rollout.collect_local``,
or ``lockstep.collect_together`` in trees before issue 32) on ``W`` workers of ``N`` CartPoles with a PPO acting
copy, the trees alternating in each round (the order reversed every other round), in CPU seconds; it prints
each tree's median microseconds per vector step and the median (and quartiles) of the per-round speed
relative to the first tree. Give a tree twice (a second path to it, a symlink) for the noise floor::

    python benchmarks/ab_inprocess.py collect --trees <old tree>,<old tree again>,<new tree> --cases 1x8,2x64 \
        --rollouts 10 --rounds 15

``iterations`` times whole iterations of a preset (``engine.step()``, one torch thread, logging off) for
each tree in its own process, the trees alternating round by round, and prints each tree's CPU ms per
iteration and the median per-round ratio to the first tree (``--warm`` iterations first, untimed)::

    python benchmarks/ab_inprocess.py iterations --trees <old tree>,<new tree> --preset mountaincar_sac \
        --warm 40 --iters 40 --rounds 4
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import List

os.environ.setdefault("OMP_NUM_THREADS", "1")


def _tree() -> str:
    import rlightning

    return os.path.dirname(os.path.dirname(os.path.abspath(rlightning.__file__)))


def sampling(label: str, cases, seconds: float, rounds: int, clock: str = "wall") -> None:
    tree = _tree()
    sys.path.insert(0, os.path.join(tree, "benchmarks", "peers"))
    import _common as c  # noqa: E402
    import gymnasium as gym
    import rlightning_sampling as rs
    import torch
    from torch import nn

    from rlightning.utils.builders import build_run

    c.set_threads()
    for case in cases:
        _sampling_case(c, rs, build_run, gym, torch, nn, label, case, seconds, rounds, clock)


def _alternate(what: str, other_name: str, ours, other, seconds: float, rounds: int, timer=time.perf_counter) -> None:
    """Print ``what``'s median rate and ratio to ``other_name`` over ``rounds`` pairs of windows of ``seconds``:
    ``ours()`` (returns env steps and the seconds it timed), then ``other()`` (returns env steps, timed by
    ``timer`` around the window); one untimed call of each first."""
    ours()
    other()
    rates, ratios = [], []
    for _ in range(rounds):
        done = spent = 0.0
        t = time.perf_counter()
        while time.perf_counter() - t < seconds:
            got, dt = ours()
            done, spent = done + got, spent + dt
        mine = done / spent
        done, t, t_rate = 0, time.perf_counter(), timer()
        while time.perf_counter() - t < seconds:
            done += other()
        rates.append(mine)
        ratios.append(mine / (done / (timer() - t_rate)))
    per = ", ".join(f"{r:.2f}" for r in ratios)
    print(
        f"{what}: ours {statistics.median(rates):.0f} env steps/s, "
        f"ours / {other_name} median {statistics.median(ratios):.2f} ({per})",
        flush=True,
    )


def _sampling_case(
    c, rs, build_run, gym, torch, nn, label: str, case: str, seconds: float, rounds: int, clock: str
) -> None:
    w, n = c.parse_case(case)
    # Rates per wall-clock or per CPU second of this process (both sides are single-threaded; load
    # inflates CPU time least). The windows themselves are wall-clock.
    timer = time.process_time if clock == "cpu" else time.perf_counter
    engine = build_run(rs.config("local", case)).engine
    env = gym.make_vec(c.ENV, num_envs=w * n, vectorization_mode="vector_entry_point")
    actor = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2))
    state = [env.reset(seed=0)[0]]

    def limit() -> int:
        x = state[0]
        for _ in range(128):
            with torch.no_grad():
                a = torch.distributions.Categorical(logits=actor(torch.as_tensor(x))).sample()
            x, *_ = env.step(a.numpy())
        state[0] = x
        return 128 * w * n

    def ours():
        t0 = timer()
        steps = engine.rollout()["rollout_env_steps"]
        dt = timer() - t0
        engine.buffer.clear()  # untimed
        return steps, dt

    _alternate(f"{label} sampling {case}", "limit", ours, limit, seconds, rounds, timer)
    engine.close()
    env.close()


def raystep(label: str, cases, seconds: float, rounds: int) -> None:
    tree = _tree()
    sys.path.insert(0, os.path.join(tree, "benchmarks", "peers"))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (tree, os.environ.get("PYTHONPATH", "")) if p)
    sys.path.insert(0, tree)
    import _common as c  # noqa: E402
    import rlightning_sampling as rs

    from benchmarks.ray_floor import floor_stepper
    from rlightning.utils.builders import build_run
    from rlightning.utils.ray.runtime import acquire_ray, release_ray

    c.set_threads()
    acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    try:
        for case in cases:
            _raystep_case(c, rs, build_run, floor_stepper, label, case, seconds, rounds)
    finally:
        release_ray()


def _raystep_case(c, rs, build_run, floor_stepper, label: str, case: str, seconds: float, rounds: int) -> None:
    w, n = c.parse_case(case)
    engine = build_run(rs.config("ray-step", case)).engine
    step, stop = floor_stepper([(f"floor_{i}", n) for i in range(w)])
    k = [0]

    def floor() -> int:
        for _ in range(rs.STEPS):
            step(k[0])
            k[0] += 1
        return rs.STEPS * w * n

    def ours():
        t0 = time.perf_counter()
        steps = engine.rollout()["rollout_env_steps"]
        dt = time.perf_counter() - t0
        engine.buffer.clear()  # untimed
        return steps, dt

    _alternate(f"{label} raystep {case}", "Ray floor", ours, floor, seconds, rounds)
    engine.close()
    stop()


def buffer(label: str, kinds, rounds: int) -> None:
    import torch

    from rlightning.buffer import ReplayBuffer
    from rlightning.utils.config import BufferConfig

    torch.set_num_threads(1)
    for kind in kinds:
        _buffer_kind(torch, ReplayBuffer, BufferConfig, label, kind, rounds)


def _buffer_kind(torch, ReplayBuffer, BufferConfig, label: str, kind: str, rounds: int) -> None:
    g = torch.Generator().manual_seed(0)
    n = 1000
    data = {
        "obs": torch.randn(n, 4, generator=g),
        "action": torch.randint(0, 2, (n,), generator=g),
        "reward": torch.ones(n),
        "next_obs": torch.randn(n, 4, generator=g),
        "terminated": torch.zeros(n, dtype=torch.bool),
        "truncated": torch.zeros(n, dtype=torch.bool),
    }
    if kind == "image":
        for k in ("obs", "next_obs"):
            data[k] = torch.randint(0, 255, (n, 84, 84, 3), dtype=torch.uint8, generator=g)
    cap = 1_000_000 if kind == "cartpole" else 10_000
    try:
        buf = ReplayBuffer(config=BufferConfig(capacity=cap, seed=0), remote=False)
    except TypeError:  # older trees: no placement keyword
        buf = ReplayBuffer(config=BufferConfig(capacity=cap, seed=0))
    buf = buf.init([], num_storages=1, num_train_workers=1)
    store = {k: torch.zeros((cap,) + v.shape[1:], dtype=v.dtype) for k, v in data.items()}
    for i in range(0, cap, n):
        buf.extend(data)
        for k in store:
            store[k][i : i + n].copy_(data[k])

    def limit():
        idx = torch.randint(cap, (256,))
        return {k: v.index_select(0, idx) for k, v in store.items()}

    calls = 2000 if kind == "cartpole" else 200
    ratios = []
    for _ in range(rounds):
        spent = []
        for fn in (lambda: buf.sample(256), limit):
            fn()
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            spent.append(time.perf_counter() - t0)
        ratios.append(spent[1] / spent[0])
    per = ", ".join(f"{r:.2f}" for r in ratios)
    print(f"{label} buffer sample {kind}: ours / limit median {statistics.median(ratios):.2f} ({per})", flush=True)


def _ours() -> dict:
    return {k: v for k, v in sys.modules.items() if k == "rlightning" or k.startswith("rlightning.")}


def _apart(tree: str, build):
    """``build(import_module)`` with ``tree``'s rlightning imported apart from any other tree's; returns what it
    built and the tree's modules (``sys.modules`` entries, to swap in when the tree runs code that imports
    lazily)."""
    import importlib

    saved = _ours()
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, os.path.abspath(tree))
    try:
        built = build(importlib.import_module)
        mine = _ours()
    finally:
        sys.path.remove(os.path.abspath(tree))
        for k in _ours():
            del sys.modules[k]
        sys.modules.update(saved)
    return built, mine


def _load_tree(tree: str) -> dict:
    """Import ``tree``'s rlightning apart from any other tree's: its Storage, EnvRet and PolicyResponse."""

    def build(imp):
        storage, types = imp("rlightning.buffer.utils.storage"), imp("rlightning.types")
        return {"Storage": storage.Storage, "EnvRet": types.EnvRet, "PolicyResponse": types.PolicyResponse}

    return _apart(tree, build)[0]


def transition(trees, envs, calls: int, rounds: int) -> None:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    mods = [_load_tree(t) for t in trees]
    for num_envs in envs:
        _transition_case(np, mods, trees, num_envs, calls, rounds)


def _transition_case(np, mods, trees, num_envs: int, calls: int, rounds: int) -> None:
    rng = np.random.default_rng(0)
    steps = calls * (rounds + 1)
    obs = rng.normal(size=(steps, num_envs, 4)).astype(np.float32)
    done = rng.random((steps, num_envs)) < 0.02
    stores, feeds = [], []
    for m in mods:
        rets, resps = [], []
        for k in range(steps):
            ones = np.ones(num_envs, np.float32)  # a vectorised env (of one env too: older trees take no other)
            rets.append(m["EnvRet"]("bench-0", obs[k], ones, done[k], np.zeros(num_envs, bool)))
            act = np.zeros(num_envs, np.int64)
            resps.append(m["PolicyResponse"]("bench-0", action=act, log_prob=-ones / 2, value=ones / 10))
        stores.append(m["Storage"](1_000_000, "circular", "transition", [], "cpu", seed=0))
        feeds.append(iter(list(zip(rets, resps))))
    for st, feed in zip(stores, feeds):  # warm up: first allocations
        for _ in range(calls):
            st.add_transition(*next(feed))
    per_call = [[] for _ in trees]
    ratios = [[] for _ in trees]
    for _ in range(rounds):
        spent = []
        for st, feed in zip(stores, feeds):
            items = [next(feed) for _ in range(calls)]
            add = st.add_transition
            t0 = time.perf_counter()
            for ret, resp in items:
                add(ret, resp)
            spent.append(time.perf_counter() - t0)
        for i, s in enumerate(spent):
            per_call[i].append(s / calls * 1e6)
            ratios[i].append(s / spent[0])
    sizes = [len(st) for st in stores]
    for i, tree in enumerate(trees):
        per = ", ".join(f"{r:.2f}" for r in ratios[i])
        print(
            f"add_transition {num_envs} env(s) {tree}: {statistics.median(per_call[i]):.1f} us/call, "
            f"/ {trees[0]} median {statistics.median(ratios[i]):.2f} ({per}); stored {sizes[i]}",
            flush=True,
        )


def rollout(trees, kinds, calls: int, rounds: int) -> None:
    import numpy as np
    import torch
    from tensordict import TensorDict

    torch.set_num_threads(1)
    mods = [_load_tree(t) for t in trees]
    for kind in kinds:
        _rollout_kind(np, torch, TensorDict, mods, trees, kind, calls, rounds)


def _rollout_kind(np, torch, TensorDict, mods, trees, kind: str, calls: int, rounds: int) -> None:
    n, t, cap = (64, 128, 1_000_000) if kind == "cartpole" else (16, 32, 4096)
    g = torch.Generator().manual_seed(0)
    rng = np.random.default_rng(0)

    def record():
        if kind == "cartpole":
            obs = torch.randn(n, t + 1, 4, generator=g)
        else:
            obs = torch.randint(0, 255, (n, t + 1, 84, 84, 3), dtype=torch.uint8, generator=g)
        done = torch.from_numpy(rng.random((n, t)) < (0.02 if kind == "cartpole" else 0.05))
        valid = torch.ones(n, t, dtype=torch.bool)
        valid[:, 1:] = ~done[:, :-1]
        td = TensorDict(
            {
                "obs": obs[:, :t],
                "action": torch.zeros(n, t, dtype=torch.int64),
                "log_prob": torch.zeros(n, t),
                "valid": valid,
                "next": {
                    "obs": obs[:, 1:],
                    "reward": torch.ones(n, t),
                    "terminated": done,
                    "truncated": torch.zeros(n, t, dtype=torch.bool),
                    "done": done,
                },
            },
            batch_size=[n, t],
        )
        td.set_non_tensor("env_id", "bench-0")
        return td

    pool = [record() for _ in range(8)]
    stores = [m["Storage"](cap, "circular", "transition", [], "cpu", seed=0) for m in mods]
    for st in stores:  # warm up: the ring's allocation
        for td in pool:
            st.add_rollout(td)
    per_call = [[] for _ in trees]
    ratios = [[] for _ in trees]
    for r in range(rounds):
        spent = []
        for st in stores:
            t0 = time.perf_counter()
            for i in range(calls):
                st.add_rollout(pool[(r * calls + i) % len(pool)])
            spent.append(time.perf_counter() - t0)
        for i, sp in enumerate(spent):
            per_call[i].append(sp / calls * 1e3)
            ratios[i].append(sp / spent[0])
    for i, tree in enumerate(trees):
        per = ", ".join(f"{x:.2f}" for x in ratios[i])
        print(
            f"add_rollout {kind} [{n}, {t}] {tree}: {statistics.median(per_call[i]):.2f} ms/call, "
            f"/ {trees[0]} median {statistics.median(ratios[i]):.2f} ({per})",
            flush=True,
        )


_ITERATIONS_CHILD = """
import sys, tempfile, time
import torch
torch.set_num_threads(1)
from rlightning.utils.builders import build_run
from rlightning.utils.config import apply_overrides, load_preset
preset, warm, iters = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
with tempfile.TemporaryDirectory() as run_dir:
    cfg = apply_overrides(load_preset(preset), ["log.progress=false", "log.jsonl=false", f"log.run_dir={run_dir}",
                                                "train.iterations=1000000", "train.target_return=null"])
    engine = build_run(cfg).engine
    for _ in range(warm):
        engine.step()
    t0 = time.process_time()
    for _ in range(iters):
        engine.step()
    print("@@ms", (time.process_time() - t0) / iters * 1e3, flush=True)
    engine.close()
"""


def _labels(trees) -> List[str]:
    """Each tree's commit (its short hash; "again" for a second path to the same tree): no paths in results."""
    import subprocess

    out: List[str] = []
    for tree in trees:
        try:
            rev = subprocess.run(
                ["git", "-C", tree, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
            ).stdout.strip()
            dirty = subprocess.run(
                ["git", "-C", tree, "status", "--porcelain", "--", "rlightning"], capture_output=True, text=True
            ).stdout.strip()
            label = rev + ("+changes" if dirty else "")
        except (OSError, subprocess.CalledProcessError):
            label = f"tree {len(out) + 1}"
        while label in out:
            label += " (again)"
        out.append(label)
    return out


def collect(trees, cases, rollouts: int, rounds: int, steps: int = 128, save: bool = False) -> None:
    import numpy as np
    import torch

    torch.set_num_threads(1)
    labels = _labels(trees)
    rows: List[List[str]] = []
    raw: dict = {}
    for case in cases:
        w, n = (int(x) for x in case.split("x"))
        runs = [_collect_tree(tree, w, n, steps) for tree in trees]
        per_step: List[List[float]] = [[] for _ in trees]
        speed: List[List[float]] = [[] for _ in trees]
        for r in range(rounds):
            order = list(range(len(trees)))[:: 1 if r % 2 == 0 else -1]
            got = {k: runs[k](rollouts) for k in order}
            for k in range(len(trees)):
                per_step[k].append(got[k] / (rollouts * steps) * 1e6)
                speed[k].append(got[0] / got[k])
        for k, tree in enumerate(trees):
            q1, q3 = np.percentile(speed[k], [25, 75])
            print(
                f"collect {case} {tree}: {statistics.median(per_step[k]):.2f} us per vector step; speed / "
                f"{trees[0]} median {statistics.median(speed[k]):.3f} (quartiles {q1:.3f}, {q3:.3f})",
                flush=True,
            )
            rows.append(
                [case, labels[k], f"{statistics.median(per_step[k]):.2f}", f"{statistics.median(speed[k]):.3f}"]
                + [f"{q1:.3f}", f"{q3:.3f}"]
            )
            raw.setdefault(case, {})[labels[k]] = {"us_per_step": per_step[k], "speed": speed[k]}
    if save:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from benchmarks import report

        head = "| case | tree | us per vector step | speed / first tree | q1 | q3 |\n|---|---|---|---|---|---|\n"
        table = head + "\n".join("| " + " | ".join(r) + " |" for r in rows)
        text = (
            f"CPU seconds per local rollout ({steps} steps, {rollouts} per tree per round, {rounds} rounds, the trees "
            "alternating in one process); speed: the first tree's time over each tree's, median over rounds\n\n"
        )
        command = (
            "python benchmarks/ab_inprocess.py collect --trees <first>,<first again>,<other> "
            f"--cases {','.join(cases)} --rollouts {rollouts} --rounds {rounds} --save"
        )
        report.save(
            "ab_collect",
            "In-process A/B of the local rollout (collect) between trees",
            text + table,
            data=raw,
            command=command,
        )


def _collect_tree(tree: str, w: int, n: int, steps: int):
    """``tree``'s local rollout of ``w`` workers of ``n`` CartPoles as ``run(rollouts) -> CPU seconds``; the tree's
    modules are swapped into ``sys.modules`` around each run (the rollout imports some of them when it runs)."""

    def build(imp):
        rw, gym_env = imp("rlightning.env.rollout_worker"), imp("rlightning.env.gym_env")
        ppo, config = imp("rlightning.policy.algorithms.ppo"), imp("rlightning.utils.config")
        try:
            together = imp("rlightning.env.local_rollout").collect_local
        except ImportError:  # the tree before issue 32
            together = imp("rlightning.env.lockstep").collect_together
        workers = []
        for i in range(w):
            worker = rw.RolloutWorker(gym_env.GymnasiumEnv, config.EnvConfig(name="CartPole-v1", num_envs=n), i)
            policy_config = config.PolicyConfig(type="ppo", hidden_sizes=[64, 64])
            worker.attach_policy(ppo.PPOPolicy.acting_copy_factory(policy_config, worker.get_metadata(), 0))
            worker.reset(seed=i)
            workers.append(worker)
        return workers, together

    (workers, together), mine = _apart(tree, build)

    def run(rollouts: int) -> float:
        before = _ours()
        sys.modules.update(mine)
        try:
            one = (lambda: workers[0].collect(steps)) if w == 1 else (lambda: together(workers, steps))
            one()  # untimed: the first rollout after the other trees ran
            t0 = time.process_time()
            for _ in range(rollouts):
                one()
            return time.process_time() - t0
        finally:
            sys.modules.update(before)

    return run


def iterations(trees, preset: str, warm: int, iters: int, rounds: int) -> None:
    import subprocess

    per_iter = [[] for _ in trees]
    for r in range(rounds):
        order = list(range(len(trees))) if r % 2 == 0 else list(reversed(range(len(trees))))
        got = {}
        for i in order:
            env = {**os.environ, "PYTHONPATH": trees[i]}
            args = [sys.executable, "-c", _ITERATIONS_CHILD, preset, str(warm), str(iters)]
            out = subprocess.run(args, cwd=trees[i], env=env, capture_output=True, text=True)
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("@@ms ")]
            if out.returncode != 0 or not lines:
                raise RuntimeError(f"iterations: the run of {trees[i]} failed:\n{out.stderr[-3000:]}")
            got[i] = float(lines[-1].split()[1])
        for i in range(len(trees)):
            per_iter[i].append(got[i])
    for i, tree in enumerate(trees):
        ratios = [a / b for a, b in zip(per_iter[i], per_iter[0])]
        per = ", ".join(f"{x:.1f}" for x in per_iter[i])
        print(
            f"iterations {preset} {tree}: {statistics.median(per_iter[i]):.1f} CPU ms/iteration ({per}), "
            f"/ {trees[0]} median {statistics.median(ratios):.3f}",
            flush=True,
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("item", choices=["sampling", "raystep", "buffer", "transition", "rollout", "collect", "iterations"])
    p.add_argument("--trees", default="", help="transition: comma-separated trees (the first is the reference)")
    p.add_argument("--envs", default="1,64", help="transition: sub-envs per step")
    p.add_argument("--calls", type=int, default=2000, help="transition: calls per tree per round (rollout: / 200)")
    p.add_argument("--label", default="")
    p.add_argument("--cases", default="1x8,2x64", help="sampling and raystep cases (W x N)")
    p.add_argument("--kinds", default="cartpole,image", help="buffer kinds")
    p.add_argument("--seconds", type=float, default=0.5, help="seconds per sampling window")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rollouts", type=int, default=10, help="collect: timed rollouts per tree per round")
    p.add_argument("--save", action="store_true", help="collect: write a results file (ab_collect)")
    p.add_argument("--preset", default="mountaincar_sac", help="iterations: the preset")
    p.add_argument("--warm", type=int, default=40, help="iterations: untimed iterations first")
    p.add_argument("--iters", type=int, default=40, help="iterations: timed iterations per round")
    p.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="sampling: rates per wall-clock or CPU second"
    )
    a = p.parse_args()
    label = a.label or _tree()
    if a.item == "sampling":
        sampling(label, a.cases.split(","), a.seconds, a.rounds, a.clock)
    elif a.item == "raystep":
        raystep(label, a.cases.split(","), a.seconds, a.rounds)
    elif a.item == "collect":
        if not a.trees:
            p.error("collect needs --trees <reference tree>,<other tree>[,...]")
        collect(a.trees.split(","), a.cases.split(","), a.rollouts, a.rounds, save=a.save)
    elif a.item == "iterations":
        if not a.trees:
            p.error("iterations needs --trees <reference tree>,<other tree>[,...]")
        iterations(a.trees.split(","), a.preset, a.warm, a.iters, a.rounds)
    elif a.item in ("transition", "rollout"):
        trees = a.trees.split(",") if a.trees else [_tree()]
        if a.item == "transition":
            transition(trees, [int(e) for e in a.envs.split(",")], a.calls, a.rounds)
        else:
            rollout(trees, a.kinds.split(","), max(1, a.calls // 200), a.rounds)
    else:
        buffer(label, a.kinds.split(","), a.rounds)


if __name__ == "__main__":
    main()
