"""Two benchmark sides in one process, in alternating rounds: their ratio on a loaded machine.

``benchmarks/run`` measures its sides one after the other, so their ratio moves with the machine's load. Here
one process builds both sides, runs one untimed iteration of each, then ``--rounds`` rounds of ``--iters``
whole iterations of each, alternating which goes first, and prints each side's env steps per second and the
median of the per-round ratios (first side / second side)::

    python benchmarks/pairs.py pixelppo --rounds 5 --iters 2            # rlightning / its plain torch floor
    python benchmarks/pairs.py mask --case "local 2x8" --rounds 7       # masked PPO / unmasked PPO
    python benchmarks/pairs.py mask --case "ray 2x8" --clock wall --rounds 7

``pixelppo``: ``peers/rlightning_pixelppo.py``'s local engine (one env worker of 8 acting with its policy
copy) against ``peers/floor_pixelppo.py`` (the same iteration as one plain torch loop, CleanRL's Atari PPO
shape). ``mask``: ``peers/rlightning_maskppo.py``'s engine with the ``action_mask`` key against the same
engine on the same env without it. ``--clock cpu`` counts seconds of this process's CPU time (sides that
run in this process on one torch thread; other processes' load inflates CPU time least), ``wall``
wall-clock seconds (Ray env workers run in other processes: use ``wall``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
PEERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers")


def alternate(sides: dict, rounds: int, iters: int, timer) -> dict:
    """Each side's rate per round and the per-round ratios (first / second); prints every round and the medians."""
    (a, run_a), (b, run_b) = sides.items()
    for fn in (run_a, run_b):
        fn()  # warm-up
    rates = {a: [], b: []}
    for r in range(rounds):
        for name in (a, b) if r % 2 == 0 else (b, a):
            t0, done = timer(), 0
            for _ in range(iters):
                done += sides[name]()
            rates[name].append(done / (timer() - t0))
        print(f"round {r + 1}: {a} {rates[a][-1]:.1f}, {b} {rates[b][-1]:.1f} env steps/s", flush=True)
    ratios = [x / y for x, y in zip(rates[a], rates[b])]
    print(
        f"{a} median {statistics.median(rates[a]):.1f}, {b} median {statistics.median(rates[b]):.1f} env steps/s; "
        f"{a} / {b} median {statistics.median(ratios):.3f} (rounds {min(ratios):.3f}-{max(ratios):.3f})",
        flush=True,
    )
    return {"rates": rates, "ratios": ratios}


def save_pair(a: argparse.Namespace, got: dict) -> None:
    """The pair's medians as a results file (``benchmarks/results/<date>-pairs.json``)."""
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from benchmarks.report import save

    (first, rates_a), (second, rates_b) = got["rates"].items()
    ratios = got["ratios"]
    what = "pixel PPO" if a.pair == "pixelppo" else f"masked PPO, {a.case}"
    text = (
        f"{what}: {a.clock} clock, {a.rounds} rounds x {a.iters} iterations per side, sides alternated\n\n"
        f"| pair | {first} env steps/s | {second} env steps/s | {first} / {second} (median) | rounds |\n"
        "|---|---|---|---|---|\n"
        f"| {a.pair} {a.case if a.pair == 'mask' else ''} | {statistics.median(rates_a):.1f} "
        f"| {statistics.median(rates_b):.1f} | {statistics.median(ratios):.3f} | {min(ratios):.3f}-{max(ratios):.3f} |"
    )
    save("pairs", f"Two sides in one process, alternating rounds: {first} / {second} ({what})", text, data=got)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pair", choices=["pixelppo", "mask"])
    p.add_argument("--case", default="local 2x8", help="mask: 'local 2x8' or 'ray 2x8'")
    p.add_argument("--rounds", type=int, default=5, help="rounds of (first, second) windows")
    p.add_argument("--iters", type=int, default=2, help="whole iterations per side and round")
    p.add_argument("--clock", default="cpu", choices=["cpu", "wall"], help="CPU time of this process or wall-clock")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    sys.path.insert(0, PEERS)
    import _common as c  # noqa: E402

    c.repo_root_on_path()
    c.set_threads()
    timer = time.process_time if a.clock == "cpu" else time.perf_counter
    print(f"{a.pair} {a.case if a.pair == 'mask' else ''}, {a.clock} clock, {a.rounds} x {a.iters} iterations")
    if a.pair == "pixelppo":
        import floor_pixelppo  # noqa: E402
        import rlightning_pixelppo  # noqa: E402

        engine = rlightning_pixelppo.build("local")
        floor = floor_pixelppo.Floor(a.seed)

        def ours() -> int:
            before = engine.env_steps
            engine.step()
            return engine.env_steps - before

        got = alternate({"rlightning": ours, "floor": floor.iteration}, a.rounds, a.iters, timer)
        engines = [engine]
        floor.env.close()
    else:
        import rlightning_maskppo as mp  # noqa: E402

        remote = a.case.startswith("ray")
        if remote:
            from rlightning.utils.ray.runtime import acquire_ray

            acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
        engines = [mp.build(a.case, True), mp.build(a.case, False)]
        got = alternate(
            {"masked": mp.iteration_of(engines[0]), "unmasked": mp.iteration_of(engines[1])},
            a.rounds,
            a.iters,
            timer,
        )
    for engine in engines:
        engine.close()
    if a.pair == "mask" and a.case.startswith("ray"):
        from rlightning.utils.ray.runtime import release_ray

        release_ray()
    save_pair(a, got)


if __name__ == "__main__":
    main()
