"""Sweep anchor: rl-baselines3-zoo's Optuna optimisation of SB3's PPO against ``lab.sweep(search="optuna")``.

Both sides search PPO's hyperparameters on CartPole-v1 with Optuna's TPE sampler, the same number of
trials and the same env-step budget per trial, each in a fresh process (the zoo in its own venv,
``.bench/venvs/zoo``). The figure is the best return found per CPU-hour: the CPU time of the side's
process tree (every process it started, Ray's workers included: see ``run_side``). The goal
(issue 37): ours at least 1.5x the zoo's.

The returns differ in kind: the zoo's is its pruning evaluation (deterministic policy, ``--eval-episodes``
episodes at the trial's last evaluation), ours the trial's training ``episode_return_mean`` at its end (what
ASHA ranks on; a stochastic policy's, over its last episodes). The table also gives our best trial's
deterministic return over 5 episodes, as the zoo measures its own (``best_eval_5``).

    python benchmarks/sweep_anchor.py --trials 8 --env-steps 20000
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OURS = """
import json, sys
from ray import tune
from rlightning.notebook import Lab
from rlightning.utils.config import apply_overrides, load_preset
trials, steps, folder = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
cfg = apply_overrides(load_preset("cartpole_ppo"), [
    "cluster.remote_env=false", "env.num_workers=1", "env.num_envs=8", "train.rollout_steps=64",
    "log.progress=false", f"log.run_dir={folder}"])
space = {  # the zoo's PPO sampler's main axes, in rlightning's names
    "policy.optim.lr": tune.loguniform(1e-5, 1e-2),
    "policy.ent_coef": tune.loguniform(1e-8, 0.1),
    "policy.clip_coef": tune.choice([0.1, 0.2, 0.3, 0.4]),
    "policy.gamma": tune.choice([0.9, 0.95, 0.98, 0.99, 0.995, 0.999]),
    "policy.gae_lambda": tune.choice([0.8, 0.9, 0.92, 0.95, 0.98, 0.99, 1.0]),
    "policy.update_epochs": tune.choice([1, 5, 10, 20]),
}
lab = Lab.local(num_cpus=2, log_to_driver=False)
exp = lab.sweep(cfg, space, search="optuna", num_samples=trials, scheduler="asha",
                stop={"env_steps": steps}, max_concurrent=2, name="anchor").wait()
df = exp.results_df()
# The zoo's value is a deterministic evaluation (5 episodes); the same of our best trial's final weights.
import gymnasium as gym
from rlightning import load_policy
policy, env, evals = load_policy(exp.best_checkpoint()), gym.make("CartPole-v1"), []
for episode in range(5):
    obs, _ = env.reset(seed=10_000 + episode)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(policy.predict(obs, deterministic=True)[0])
        total, done = total + float(reward), terminated or truncated
    evals.append(total)
print("RESULT " + json.dumps({"best": float(df["last"].max()), "env_steps": int(df["env_steps"].sum()),
      "stopped_early": int((df["env_steps"] < steps).sum()), "best_eval_5": sum(evals) / len(evals),
      "best_config": {k: df.loc[df["last"].idxmax(), k] for k in space}}, default=float))
lab.shutdown()
"""


def run_side(cmd, cwd: Path) -> dict:
    """Run one side; its wall-clock and the CPU seconds of its process tree.

    ``RUSAGE_CHILDREN`` counts only processes reaped up the tree, and Ray's workers are children of the raylet,
    which may exit before it reaps them; so the tree is also sampled every 0.2 s (``psutil``: every descendant's
    user + system time, the last value seen per process) and the larger of the two is the side's CPU time.
    """
    import psutil

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = psutil.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen: dict = {}
    out_err = {}

    def drain(name, stream):
        out_err[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, s)) for n, s in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    while proc.poll() is None:
        try:
            tree = [proc, *proc.children(recursive=True)]
        except psutil.Error:
            tree = []
        for p in tree:
            try:
                t = p.cpu_times()
                seen[(p.pid, p.create_time())] = t.user + t.system
            except psutil.Error:
                pass
        time.sleep(0.2)
    for r in readers:
        r.join()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    reaped = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    sampled = sum(seen.values())
    if proc.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({proc.returncode}):\n{out_err['out'][-3000:]}\n{out_err['err'][-3000:]}")
    return {"wall_s": wall, "cpu_s": max(reaped, sampled), "cpu_reaped_s": reaped, "cpu_sampled_s": sampled,
            "processes": len(seen), "stdout": out_err["out"], "stderr": out_err["err"]}  # fmt: skip


def zoo_side(trials: int, steps: int, folder: Path, seed: int) -> dict:
    from benchmarks.harness import venvs

    py = venvs.ensure("zoo")
    cmd = [
        str(py), "-m", "rl_zoo3.train", "--algo", "ppo", "--env", "CartPole-v1", "-optimize",
        "--n-trials", str(trials), "--n-timesteps", str(steps), "--n-jobs", "1", "--sampler", "tpe",
        "--pruner", "median", "--n-evaluations", "4", "--eval-episodes", "5", "--seed", str(seed),
        "--log-folder", str(folder), "--no-optim-plots", "--verbose", "0",
    ]  # fmt: skip
    out = run_side(cmd, folder)
    found = re.search(r"Best trial:\s*\n\s*Value:\s*([-\d.eE+]+)", out["stdout"] + out["stderr"])
    if not found:
        raise RuntimeError(f"no 'Best trial' value in the zoo's output:\n{out['stdout'][-3000:]}")
    keep = ("wall_s", "cpu_s", "cpu_reaped_s", "cpu_sampled_s", "processes")
    return {"best": float(found.group(1)), **{k: out[k] for k in keep}, "versions": venvs.versions("zoo")}


def ours_side(trials: int, steps: int, folder: Path) -> dict:
    out = run_side([sys.executable, "-c", OURS, str(trials), str(steps), str(folder)], ROOT)
    line = [x for x in out["stdout"].splitlines() if x.startswith("RESULT ")][-1]
    keep = ("wall_s", "cpu_s", "cpu_reaped_s", "cpu_sampled_s", "processes")
    return {**json.loads(line[len("RESULT ") :]), **{k: out[k] for k in keep}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--env-steps", type=int, default=20000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        zoo = zoo_side(args.trials, args.env_steps, Path(tmp), args.seed)
        ours = ours_side(args.trials, args.env_steps, Path(tmp))
    for side in (zoo, ours):
        side["best_per_cpu_hour"] = side["best"] / (side["cpu_s"] / 3600)
    ratio = ours["best_per_cpu_hour"] / zoo["best_per_cpu_hour"]
    data = {"trials": args.trials, "env_steps": args.env_steps, "zoo": zoo, "ours": ours, "ratio": ratio}
    print(json.dumps(data, default=str))
    text = (
        "| side | best return | best trial, deterministic (5 episodes) | CPU s (reaped; sampled) | wall s "
        "| best return per CPU-hour |\n|---|---|---|---|---|---|\n"
        + "".join(
            f"| {name} | {s['best']:.1f} | {s.get('best_eval_5', s['best']):.1f} "
            f"| {s['cpu_s']:.0f} ({s['cpu_reaped_s']:.0f}; {s['cpu_sampled_s']:.0f}) | {s['wall_s']:.0f} "
            f"| {s['best_per_cpu_hour']:.0f} |\n"
            for name, s in (("rl-zoo3 (Optuna TPE, median pruner)", zoo), ("lab.sweep (Optuna TPE, ASHA)", ours))
        )
        + f"| ours / zoo (goal >= 1.5) | | | | | {ratio:.2f} |"
    )
    print(text)
    from benchmarks.report import save

    save("sweep_anchor", "Sweep anchor: best return per CPU-hour, lab.sweep against rl-zoo3's Optuna", text, data=data)


if __name__ == "__main__":
    main()
