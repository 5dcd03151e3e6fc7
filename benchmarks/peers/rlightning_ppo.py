"""rlightning PPO to a target return: CartPole-v1 (case ``solve``) and LunarLander-v3 (case ``lunar``).

``solve``: the mean return of the last 20 episodes >= 475 on CartPole-v1;
``lunar``: >= 200 on LunarLander-v3 (needs ``pip install "rlightning[box2d]"``).
Timed from the built engine to the iteration that reaches the target (the
build is cold start's business), as ``sb3_ppo.py`` times SB3's built model.
``--preset`` picks the preset (default: the case's own, ``cartpole_ppo`` or
``lunar_ppo``; ``best``: the fastest one, ``BEST``); ``--mode ray`` puts the env
workers on Ray, ``--mode local`` in this process, ``--mode preset`` leaves the
preset's choice; ``--hparams sb3`` applies rl-baselines3-zoo's settings for the
env (what ``sb3_ppo.py`` runs) over the preset; ``--set key=value`` adds
overrides. ``--max-seconds`` stops the run after the first iteration past that
time (``solved`` is then false unless the target was reached).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import _common as c

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
c.set_threads()

from rlightning.utils.builders import build_run  # noqa: E402
from rlightning.utils.config import apply_overrides, load_preset  # noqa: E402
from rlightning.utils.ray.runtime import acquire_ray, release_ray  # noqa: E402

WINDOW = 20
#: case -> (default preset, target return)
CASES = {"solve": ("cartpole_ppo", 475.0), "lunar": ("lunar_ppo", 200.0)}
#: case -> rlightning's fastest preset to the target (``--preset best``)
BEST = {"solve": "cartpole_ppo_fast", "lunar": "lunar_ppo"}

# rl-baselines3-zoo's tuned PPO settings (hyperparams/ppo.yml; sb3_ppo.py runs them) in rlightning's terms.
# SB3's value loss is the plain mean squared error (no 1/2: vf_coef 1.0 here is SB3's 0.5) and is not clipped
# (clip_range_vf None). SB3 anneals over env steps, rlightning over iterations: the zoo's budget in iterations.
SB3_HPARAMS = {
    # 8 envs x 32 steps, one minibatch of 256, 20 epochs, lr and clip range annealed linearly from 1e-3 and 0.2
    # over 1e5 steps (390 iterations of 256 steps).
    "solve": [
        "env.num_workers=1",
        "env.num_envs=8",
        "train.rollout_steps=32",
        "train.iterations=390",
        "buffer.capacity=257",
        "policy.gamma=0.98",
        "policy.gae_lambda=0.8",
        "policy.update_epochs=20",
        "policy.num_minibatches=1",
        "policy.ent_coef=0.0",
        "policy.vf_coef=1.0",
        "policy.clip_vloss=false",
        "policy.clip_coef=0.2",
        "policy.anneal_clip=true",
        "policy.optim.lr=0.001",
        "policy.optim.anneal_lr=true",
        "policy.optim.max_grad_norm=0.5",
    ],
    # 16 envs x 1024 steps, minibatches of 64 (256 of them), 4 epochs, gamma 0.999, GAE lambda 0.98, entropy
    # 0.01; SB3's defaults otherwise (lr 3e-4 and clip 0.2 constant); the zoo's 1e6 steps = 61 iterations.
    "lunar": [
        "env.num_workers=1",
        "env.num_envs=16",
        "train.rollout_steps=1024",
        "train.iterations=61",
        "buffer.capacity=16385",
        "policy.gamma=0.999",
        "policy.gae_lambda=0.98",
        "policy.update_epochs=4",
        "policy.num_minibatches=256",
        "policy.ent_coef=0.01",
        "policy.vf_coef=1.0",
        "policy.clip_vloss=false",
        "policy.clip_coef=0.2",
        "policy.anneal_clip=false",
        "policy.optim.lr=0.0003",
        "policy.optim.anneal_lr=false",
        "policy.optim.max_grad_norm=0.5",
    ],
}


def main() -> None:
    def extra(p) -> None:
        p.add_argument("--mode", default="ray", choices=["local", "ray", "preset"])
        p.add_argument("--hparams", default="preset", choices=["preset", "sb3"], help="preset, or SB3's zoo settings")
        p.add_argument("--preset", default="", help="preset name (default: the case's own; best: the fastest)")
        p.add_argument("--set", action="append", default=[], help="extra config override key=value (repeatable)")

    a = c.args(extra)
    unknown = [k for k in a.cases if k not in CASES]
    if unknown:
        raise SystemExit(f"rlightning_ppo.py: unknown case(s) {unknown}; valid: {sorted(CASES)}")
    for case in a.cases or ["solve"]:
        preset, target = CASES[case]
        preset = BEST[case] if a.preset == "best" else a.preset or preset
        base = load_preset(preset)
        remote = base.cluster.remote_env if a.mode == "preset" else a.mode == "ray"
        if remote:
            acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
        cfg = apply_overrides(
            base,
            [
                f"cluster.remote_env={str(remote).lower()}",
                "log.progress=false",
                "log.jsonl=false",
                f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
                f"seed={a.seed}",
                f"train.return_window={WINDOW}",
                f"train.target_return={target}",
            ]
            + (SB3_HPARAMS[case] if a.hparams == "sb3" else [])
            + list(a.set),
        )
        engine = build_run(cfg).engine
        c.begin(case)
        train_to_target(engine, a.max_seconds, time.perf_counter(), case, target)
        engine.close()
        if remote:
            release_ray()


def train_to_target(engine, max_seconds: float, t0: float, case: str = "solve", target: float = 475.0) -> None:
    """``engine.run`` to the target, or the first iteration past ``max_seconds`` after ``t0``; report ``case``."""

    def within_cap(_engine, _metrics) -> bool:
        return not max_seconds or time.perf_counter() - t0 < max_seconds

    engine.run(callbacks=[within_cap])
    seconds = time.perf_counter() - t0
    ret = float(engine.last_metrics.get("episode_return_mean", 0.0))
    c.result(
        case,
        [seconds],
        "s",
        env_steps=engine.env_steps,
        iterations=engine.iteration,
        final_return=ret,
        solved=ret >= target,
        capped=bool(max_seconds) and ret < target and seconds >= max_seconds,
    )


if __name__ == "__main__":
    main()
