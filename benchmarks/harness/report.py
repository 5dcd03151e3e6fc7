"""What the harness measures and how it judges it: sides, goals, ratios, the markdown table (no I/O here).

A measurement is a dict ``{"item", "case", "side", "unit", "values": [...],
"busy": bool, "attempts": [...]}``; ``values`` holds one figure per repeat.
Ratios are a row's median over the reference's median. For throughputs a
goal is ``ratio >= threshold``; for times (seconds) ``ratio <= threshold``.
A side with role ``"floor"`` (the Ray floor of the sampling item) is a lower
bound for Ray-based samplers: rows named in ``Item.floor_of`` get a ratio to
it, and the floor row gets its ratios to the peers and the limit.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Side:
    key: str  # unique within an item
    label: str  # as printed
    role: str  # "ours", "peer", "limit", "info" or "floor"
    venv: str  # "ours" or a peer venv name
    script: str  # under benchmarks/peers/
    args: Tuple[str, ...] = ()
    per_repeat_process: bool = False  # one fresh process per repeat (cold start, PPO)
    full_only: bool = False  # skipped with --quick
    cases: Tuple[str, ...] = ()  # the item's cases this side runs (default: all)


@dataclass(frozen=True)
class Goal:
    item: str
    ours: str  # side key
    ref: str  # side key, or "limit" (the best of the item's limit sides)
    op: str  # ">=" or "<="
    threshold: float
    metric: str = ""  # "": the measured values; else an extra reported per run (e.g. "env_steps"), its median

    def text(self, ref_label: str) -> str:
        what = f"{self.metric} " if self.metric else ""
        return f"{what}{self.op} {self.threshold:g}x {ref_label}"


@dataclass(frozen=True)
class Item:
    name: str
    title: str
    sides: Tuple[Side, ...]
    cases: Tuple[str, ...]
    higher_is_better: bool = True
    quick_default: bool = True  # run by --quick unless --only names it
    extra_cols: Tuple[str, ...] = field(default_factory=tuple)  # extras shown (medians)
    floor_of: Tuple[str, ...] = ()  # side keys whose ratio to the item's floor side is shown
    quick_cases: Tuple[str, ...] = ()  # the cases --quick measures (default: all)
    limit_label: str = "limit"  # how the tables name the reference of the item's "limit" sides


@dataclass(frozen=True)
class Shared:
    """``--quick``: one fresh process measures several (item, side)s on one Ray runtime.

    The process starts as the cold-start side (so cold start stays a fresh
    interpreter), then trains the same run on to the PPO target (capped), then
    measures the sampling cases on the same Ray runtime. ``members`` maps a
    case name the script reports to ``(item, side key, case)``; ``sampling``
    (a prefix: the script reports ``<prefix>:<case>`` for each quick sampling
    case) maps prefixes to the sampling side keys.
    """

    venv: str
    script: str
    args: Tuple[str, ...]
    members: Tuple[Tuple[str, str, str, str], ...]  # (reported case, item, side key, case)
    sampling: Tuple[Tuple[str, str], ...] = ()  # (reported prefix, sampling side key)

    def slots(self, cases: Sequence[str]) -> Dict[str, Tuple[str, str, str]]:
        """Reported case -> (item, side key, case), the sampling ``cases`` included."""
        out = {r: (item, side, case) for r, item, side, case in self.members}
        for prefix, side in self.sampling:
            out.update({f"{prefix}:{case}": ("sampling", side, case) for case in cases})
        return out

    def sides(self) -> List[Tuple[str, str]]:
        return [(item, side) for _, item, side, _ in self.members] + [("sampling", side) for _, side in self.sampling]


SAMPLING_CASES = ("1x8", "1x64", "2x8", "2x64")
COLDSTART_PHASES = ("imports_s", "ray_start_s", "build_s", "first_step_s")
ITEMS: Dict[str, Item] = {
    "sampling": Item(
        "sampling",
        "Sampling throughput, CartPole-v1, MLP 4-64-64-2 (case = env workers x sub-envs; env steps/s)",
        (
            Side(
                "rl_ray",
                "rlightning, env workers on Ray (acting in the env workers: the preset)",
                "ours",
                "ours",
                "rlightning_sampling.py",
                ("--mode", "ray"),
            ),
            Side(
                "rl_ray_step",
                "rlightning, env workers on Ray, eval worker acting per step",
                "info",
                "ours",
                "rlightning_sampling.py",
                ("--mode", "ray-step"),
            ),
            Side(
                "ray_floor",
                "Ray floor of per-step calls: same calls as the row above, actors do no env work",
                "floor",
                "ours",
                "rlightning_sampling.py",
                ("--mode", "floor"),
            ),
            Side(
                "rl_local", "rlightning, local workers", "ours", "ours", "rlightning_sampling.py", ("--mode", "local")
            ),
            Side("rllib", "RLlib EnvRunners", "peer", "rllib", "rllib_sampling.py"),
            Side("torchrl", "TorchRL MultiSyncCollector", "peer", "torchrl", "torchrl_sampling.py"),
            Side(
                "limit_vep",
                "limit: make_vec vector entry point",
                "limit",
                "ours",
                "limit_sampling.py",
                ("--mode", "vector_entry_point"),
            ),
            Side(
                "limit_sync",
                "limit: SyncVectorEnv",
                "limit",
                "ours",
                "limit_sampling.py",
                ("--mode", "sync"),
                full_only=True,
            ),
        ),
        SAMPLING_CASES,
        floor_of=("rl_ray_step",),
        quick_cases=("1x8", "2x64"),
    ),
    "pixels": Item(
        "pixels",
        "Pixel sampling, synthetic 84x84x4 uint8 frames, Nature CNN acting (case = workers x sub-envs; env steps/s)",
        (
            Side(
                "rl_ray",
                "rlightning, env workers on Ray acting with the built-in CNN (transitions stored)",
                "ours",
                "ours",
                "rlightning_pixels.py",
                ("--mode", "ray"),
            ),
            Side(
                "rl_local",
                "rlightning, local env workers (transitions stored)",
                "info",
                "ours",
                "rlightning_pixels.py",
                ("--mode", "local"),
            ),
            Side(
                "rllib",
                "RLlib EnvRunners, default CNN encoder with the Nature convolutions",
                "peer",
                "rllib",
                "rllib_pixels.py",
            ),
            Side("torchrl", "TorchRL MultiSyncCollector, the same Nature CNN", "peer", "torchrl", "torchrl_pixels.py"),
            Side(
                "limit",
                "limit: one SyncVectorEnv + the same CNN, one process, nothing stored",
                "limit",
                "ours",
                "limit_pixels.py",
            ),
        ),
        ("2x16",),
    ),
    "pixelppo": Item(
        "pixelppo",
        "Pixel PPO end to end (sampling and learning), synthetic 84x84x4 uint8 frames, Nature CNN, 8 envs x 128 "
        "steps, 4 epochs of 4 minibatches (env steps/s)",
        (
            Side(
                "rl_local",
                "rlightning, one local env worker of 8 acting with its policy copy (atari_ppo's PPO)",
                "ours",
                "ours",
                "rlightning_pixelppo.py",
                ("--mode", "local"),
            ),
            Side(
                "rl_ray",
                "rlightning, 2 Ray env workers x 4 (atari_ppo's layout)",
                "info",
                "ours",
                "rlightning_pixelppo.py",
                ("--mode", "ray"),
            ),
            Side("rllib", "RLlib PPO, 1 EnvRunner x 8, learner in the driver", "peer", "rllib", "rllib_pixelppo.py"),
            Side("sb3", "Stable-Baselines3 PPO CnnPolicy, DummyVecEnv of 8", "peer", "sb3", "sb3_pixelppo.py"),
            Side(
                "floor",
                "floor: the same iteration as one plain torch loop (CleanRL's Atari PPO shape)",
                "limit",
                "ours",
                "floor_pixelppo.py",
            ),
        ),
        ("8 envs x 128 steps",),
        quick_default=False,
        extra_cols=("env_steps",),
    ),
    "maskppo": Item(
        "maskppo",
        "Masked PPO against the same PPO without the mask key: cartpole_ppo's PPO on benchmarks/mask_env.py "
        "(Dict observation, 8 actions, half allowed), 2 env workers x 8 acting with their copies, whole "
        "iterations (env steps/s)",
        (
            Side(
                "masked",
                "rlightning PPO, observation with action_mask",
                "ours",
                "ours",
                "rlightning_maskppo.py",
                ("--mask", "on"),
            ),
            Side(
                "unmasked",
                "the same PPO, the same env without the action_mask key",
                "limit",
                "ours",
                "rlightning_maskppo.py",
                ("--mask", "off"),
            ),
        ),
        ("local 2x8", "ray 2x8"),
        quick_default=False,
        extra_cols=("env_steps",),
        limit_label="unmasked",
    ),
    "buffer": Item(
        "buffer",
        "Replay buffer: extend (chunks of 1000, transitions/s) and sample (batch 256, batches/s)",
        (
            Side(
                "rl_local", "rlightning DataBuffer, local", "ours", "ours", "rlightning_buffer.py", ("--mode", "local")
            ),
            Side(
                "rl_sharded",
                "rlightning DataBuffer, 2 Ray shards",
                "info",
                "ours",
                "rlightning_buffer.py",
                ("--mode", "sharded"),
                full_only=True,
            ),
            Side("torchrl", "TorchRL ReplayBuffer(LazyTensorStorage)", "peer", "torchrl", "torchrl_buffer.py"),
            Side("limit", "limit: slice copy / index_select", "limit", "ours", "limit_buffer.py"),
        ),
        ("cartpole extend", "cartpole sample", "image extend", "image sample"),
    ),
    "ppo": Item(
        "ppo",
        "PPO time to solve (mean return of the last 20 episodes): CartPole-v1 to 475 (case solve), LunarLander-v3 "
        "to 200 (case lunar); each side's settings and SB3's (seconds)",
        (
            Side(
                "rl_ray",
                "rlightning preset as shipped (cartpole_ppo / lunar_ppo: env workers on Ray)",
                "ours",
                "ours",
                "rlightning_ppo.py",
                ("--mode", "ray"),
                per_repeat_process=True,
            ),
            Side(
                "rl_best",
                "rlightning best preset (cartpole_ppo_fast: local env workers)",
                "ours",
                "ours",
                "rlightning_ppo.py",
                ("--preset", "best", "--mode", "preset"),
                per_repeat_process=True,
                cases=("solve",),
            ),
            Side(
                "rl_local",
                "rlightning cartpole_ppo, local env workers",
                "info",
                "ours",
                "rlightning_ppo.py",
                ("--mode", "local"),
                per_repeat_process=True,
                full_only=True,
                cases=("solve",),
            ),
            Side(
                "rl_sb3hp",
                "rlightning at SB3's zoo hyperparameters, local env workers",
                "ours",
                "ours",
                "rlightning_ppo.py",
                ("--mode", "local", "--hparams", "sb3"),
                per_repeat_process=True,
            ),
            Side("rllib", "RLlib PPO", "peer", "rllib", "rllib_ppo.py", per_repeat_process=True, cases=("solve",)),
            Side(
                "sb3",
                "Stable-Baselines3 PPO, rl-zoo hyperparameters",
                "peer",
                "sb3",
                "sb3_ppo.py",
                per_repeat_process=True,
            ),
        ),
        ("solve", "lunar"),
        higher_is_better=False,
        extra_cols=("env_steps", "iterations", "final_return"),
        quick_cases=("solve",),
    ),
    "coldstart": Item(
        "coldstart",
        "Cold start: fresh interpreter to the first training iteration's result (seconds)",
        (
            Side(
                "rl",
                "rlightning Lab.local + build + step",
                "ours",
                "ours",
                "rlightning_coldstart.py",
                per_repeat_process=True,
            ),
            Side("rllib", "RLlib build_algo + train", "peer", "rllib", "rllib_coldstart.py", per_repeat_process=True),
        ),
        ("first iteration",),
        higher_is_better=False,
        extra_cols=COLDSTART_PHASES,
    ),
    "offpolicy": Item(
        "offpolicy",
        "DQN CartPole-v1 (50k env steps) and SAC Pendulum-v1 (20k), rl-zoo hyperparameters: training "
        "wall-clock (seconds), then 10 deterministic evaluation episodes",
        (
            Side(
                "rl",
                "rlightning preset (benchmarks/learning.py row)",
                "ours",
                "ours",
                "rlightning_learning.py",
                per_repeat_process=True,
            ),
            Side(
                "sb3",
                "Stable-Baselines3, rl-zoo hyperparameters",
                "peer",
                "sb3",
                "sb3_learning.py",
                per_repeat_process=True,
            ),
        ),
        ("dqn_cartpole", "sac_pendulum"),
        higher_is_better=False,
        quick_default=False,
        extra_cols=("env_steps", "return_mean"),
    ),
    "appo": Item(
        "appo",
        "APPO learner throughput, CartPole-v1, cartpole_appo's config on each side (env steps trained per second)",
        (
            Side(
                "rl_local",
                "rlightning cartpole_appo (preset: asyncrl, env workers acting with their copies)",
                "ours",
                "ours",
                "rlightning_appo.py",
                ("--mode", "local"),
            ),
            Side("rllib", "RLlib APPO, 2 EnvRunners x 8 envs, learner in the driver", "peer", "rllib", "rllib_appo.py"),
        ),
        ("learner throughput",),
        quick_default=False,
        extra_cols=("env_steps", "final_return"),
    ),
}

QUICK_SHARED: Tuple[Shared, ...] = (
    Shared(
        "ours",
        "rlightning_coldstart.py",
        ("--ppo", "--sampling", "ray,ray-step,floor"),
        (("first iteration", "coldstart", "rl", "first iteration"), ("solve", "ppo", "rl_ray", "solve")),
        (("ray", "rl_ray"), ("ray-step", "rl_ray_step"), ("floor", "ray_floor")),
    ),
    Shared(
        "rllib",
        "rllib_coldstart.py",
        ("--ppo", "--sampling"),
        (("first iteration", "coldstart", "rllib", "first iteration"), ("solve", "ppo", "rllib", "solve")),
        (("sampling", "rllib"),),
    ),
)

GOALS: Tuple[Goal, ...] = (
    Goal("sampling", "rl_ray", "rllib", ">=", 2.0),
    Goal("sampling", "rl_ray", "torchrl", ">=", 5.0),
    Goal("sampling", "rl_ray", "limit", ">=", 0.3),
    Goal("sampling", "rl_local", "limit", ">=", 0.8),
    Goal("pixels", "rl_ray", "limit", ">=", 0.6),
    Goal("pixels", "rl_ray", "rllib", ">=", 2.0),
    Goal("pixelppo", "rl_local", "rllib", ">=", 2.0),
    Goal("pixelppo", "rl_local", "sb3", ">=", 1.0),
    Goal("maskppo", "masked", "limit", ">=", 0.9),
    Goal("buffer", "rl_local", "torchrl", ">=", 1.0),
    Goal("buffer", "rl_local", "limit", ">=", 0.8),
    Goal("ppo", "rl_ray", "rllib", "<=", 0.7),
    Goal("ppo", "rl_best", "sb3", "<=", 0.5),
    Goal("ppo", "rl_sb3hp", "sb3", "<=", 1.0),
    Goal("ppo", "rl_sb3hp", "sb3", "<=", 1.2, metric="env_steps"),
    Goal("coldstart", "rl", "rllib", "<=", 0.5),
    Goal("offpolicy", "rl", "sb3", "<=", 0.7),
)


def stats(values: Sequence[float]) -> Optional[Dict[str, float]]:
    if not values:
        return None
    return {"min": min(values), "median": statistics.median(values), "max": max(values), "n": len(values)}


def _index(measurements: Sequence[dict]) -> Dict[Tuple[str, str, str], dict]:
    return {(m["item"], m["case"], m["side"]): m for m in measurements}


def values_of(m: Optional[dict], metric: str = "") -> List[float]:
    """A measurement's values (``metric`` ""), or the numbers of one of its extras (``metric`` its name)."""
    if not m:
        return []
    if not metric:
        return list(m.get("values") or [])
    return [x for x in m.get("extras", {}).get(metric, []) if isinstance(x, (int, float)) and not isinstance(x, bool)]


def reference_median(item: Item, case: str, ref: str, index: Dict, metric: str = "") -> Optional[float]:
    """The median of side ``ref`` for ``case`` (of its extra ``metric`` if given); ``"limit"``: the best median
    of the item's limit sides."""
    keys = [s.key for s in item.sides if s.role == "limit"] if ref == "limit" else [ref]
    medians = [stats(values_of(index[(item.name, case, k)], metric)) for k in keys if (item.name, case, k) in index]
    medians = [m["median"] for m in medians if m]
    if not medians:
        return None
    return max(medians) if item.higher_is_better else min(medians)


def ratio(ours: Optional[float], ref: Optional[float]) -> Optional[float]:
    if ours is None or not ref:
        return None
    return ours / ref


def unsolved(m: Optional[dict]) -> bool:
    """A run to a target (PPO) that stopped short of it (time cap or iteration limit): its time is a lower bound."""
    return bool(m) and any(x is False for x in m.get("extras", {}).get("solved", []))


def judge(measurements: Sequence[dict]) -> List[dict]:
    """Every goal for every case with both figures: ratio, threshold, met.

    A time that is only a lower bound (an unsolved run) decides a goal only where the bound does:
    ours unsolved -> "not met" if already above the threshold; the reference unsolved -> "met" if
    already below; otherwise (or both unsolved) the goal gets no verdict.
    """
    index = _index(measurements)
    out = []
    for g in GOALS:
        item = ITEMS[g.item]
        for case in item.cases:
            m = index.get((g.item, case, g.ours))
            vals = values_of(m, g.metric)
            ours = stats(vals)["median"] if vals else None
            r = ratio(ours, reference_median(item, case, g.ref, index, g.metric))
            if r is None:
                continue
            met = r >= g.threshold if g.op == ">=" else r <= g.threshold
            ours_low, ref_low = unsolved(m), unsolved(index.get((g.item, case, g.ref)))
            if (ours_low and ref_low) or (ours_low and met) or (ref_low and not met):
                continue
            out.append(
                {
                    "item": g.item,
                    "case": case,
                    "side": g.ours,
                    "ref": g.ref,
                    "op": g.op,
                    "threshold": g.threshold,
                    "metric": g.metric,
                    "ratio": r,
                    "met": met,
                }
            )
    return out


def fmt(x: Optional[float]) -> str:
    if x is None:
        return "-"
    ax = abs(x)
    if ax >= 1e6:
        return f"{x / 1e6:.2f}M"
    if ax >= 1e4:
        return f"{x / 1e3:.1f}k"
    if ax >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}" if ax < 10 else f"{x:.1f}"


def _ref_label(item: Item, ref: str) -> str:
    if ref == "limit":
        return item.limit_label
    if ref == "floor":
        return "Ray floor"
    return {"rllib": "RLlib", "torchrl": "TorchRL", "sb3": "SB3"}.get(ref, ref)


def floor_side(item: Item) -> Optional[Side]:
    return next((s for s in item.sides if s.role == "floor"), None)


def markdown(measurements: Sequence[dict], items: Sequence[str]) -> str:
    """One table per item: each side's min/median/max; ratio columns on rlightning's (and the floor's) rows.

    A ratio column ``/ X`` holds the row's median over X's median (``limit``: the best limit side;
    ``Ray floor``: only on the rows of ``Item.floor_of``). Goals are judged on rlightning's rows.
    """
    index = _index(measurements)
    verdicts = judge(measurements)
    lines: List[str] = []
    for name in items:
        item = ITEMS[name]
        refs = [k for k in ("rllib", "torchrl", "sb3") if any(s.key == k for s in item.sides)]
        if any(s.role == "limit" for s in item.sides):
            refs.append("limit")
        floor = floor_side(item)
        ratio_cols = refs + (["floor"] if floor else [])
        extra = list(item.extra_cols)
        head = ["case", "side", "min", "median", "max", "unit"] + extra
        head += [f"/ {_ref_label(item, r)}" for r in ratio_cols] + ["goals"]
        lines += [f"### {item.title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for case in item.cases:
            floor_median = None
            if floor is not None:
                fm = index.get((name, case, floor.key))
                fst = stats(fm["values"]) if fm else None
                floor_median = fst["median"] if fst else None
            for side in item.sides:
                m = index.get((name, case, side.key))
                if m is None:
                    continue
                st = stats(m["values"])
                label = side.label + (" (busy)" if m.get("busy") else "")
                if unsolved(m):
                    capped = any(m.get("extras", {}).get("capped", []))
                    label += " (not solved: time cap)" if capped else " (not solved)"
                row = [case, label]
                row += [fmt(st[k]) for k in ("min", "median", "max")] if st else ["-", "failed", "-"]
                row.append(m.get("unit", ""))
                for col in extra:
                    vals = [x for x in m.get("extras", {}).get(col, []) if isinstance(x, (int, float))]
                    row.append(fmt(statistics.median(vals)) if vals else "-")
                if side.role in ("ours", "info", "floor") and st:
                    for r in refs:
                        rr = ratio(st["median"], reference_median(item, case, r, index))
                        row.append(f"{rr:.2f}x" if rr is not None else "-")
                    if floor is not None:
                        rr = ratio(st["median"], floor_median) if side.key in item.floor_of else None
                        row.append(f"{rr:.2f}x" if rr is not None else "")
                    goals = [v for v in verdicts if v["item"] == name and v["case"] == case and v["side"] == side.key]
                    row.append(
                        "; ".join(
                            f"{v['metric'] + ' ' if v['metric'] else ''}{v['op']} {v['threshold']:g}x "
                            f"{_ref_label(item, v['ref'])}: "
                            f"{'met' if v['met'] else '**not met**'}"
                            for v in goals
                        )
                        or ""
                    )
                else:
                    row += [""] * (len(ratio_cols) + 1)
                lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


def floor_summary(measurements: Sequence[dict], items: Sequence[str]) -> str:
    """Per case of an item with a floor side: the floor, floor / limit and each floor_of side / floor.

    The floor / limit ratio bounds what any Ray-based sampler with that call pattern can reach against
    the limit on this machine; ``side / floor`` shows how much of it the side keeps.
    """
    index = _index(measurements)
    lines: List[str] = []
    for name in items:
        item = ITEMS[name]
        floor = floor_side(item)
        if floor is None or not any(m["item"] == name and m["side"] == floor.key for m in measurements):
            continue
        labels = [next(s.label for s in item.sides if s.key == k) for k in item.floor_of]
        head = ["case", "Ray floor (median)", "floor / limit"] + [f"{lb} / floor" for lb in labels]
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for case in item.cases:
            fm = index.get((name, case, floor.key))
            fst = stats(fm["values"]) if fm else None
            if fst is None:
                continue
            f_med = fst["median"]
            row = [case, f"{fmt(f_med)} {fm.get('unit', '')}".strip()]
            fl = ratio(f_med, reference_median(item, case, "limit", index))
            row.append(f"{fl:.2f}x" if fl is not None else "-")
            for k in item.floor_of:
                om = index.get((name, case, k))
                ost = stats(om["values"]) if om else None
                rr = ratio(ost["median"], f_med) if ost else None
                row.append(f"{rr:.2f}x" if rr is not None else "-")
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def goal_summary(measurements: Sequence[dict]) -> str:
    """Goals met / not met, one line per goal (all its cases)."""
    verdicts = judge(measurements)
    lines = ["| goal | cases met | worst ratio |", "|---|---|---|"]
    for g in GOALS:
        vs = [v for v in verdicts if (v["item"], v["side"], v["ref"], v["metric"]) == (g.item, g.ours, g.ref, g.metric)]
        if not vs:
            continue
        side = next(s for s in ITEMS[g.item].sides if s.key == g.ours)
        worst = min(vs, key=lambda v: v["ratio"]) if g.op == ">=" else max(vs, key=lambda v: v["ratio"])
        met = sum(v["met"] for v in vs)
        label = f"{g.item}: {side.label} {g.text(_ref_label(ITEMS[g.item], g.ref))}"
        lines.append(f"| {label} | {met}/{len(vs)} | {worst['ratio']:.2f}x ({worst['case']}) |")
    return "\n".join(lines)
