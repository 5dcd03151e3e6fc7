"""The device-resident env (``env.backend: gymnax``) against its limit and against gymnasium's vector CartPole.

Three sides per env count N, all acting with the same PPO acting copy (64x64 tanh MLP, sampled actions) on
CartPole-v1, each timed over ``--steps`` vector steps after a warm-up rollout (JIT compilation excluded):

- ``rl_gymnax``: rlightning's rollout path, ``RolloutWorker(GymnaxEnv).collect`` (record in torch on the env's
  device, episode ids, episode report);
- ``limit``: the env's own jitted step loop with the same policy: ``torch.from_dlpack`` of the observation,
  the policy's ``compute_actions``, the action back through DLPack, the jitted vmapped step; no record;
- ``rl_gymnasium``: rlightning's rollout path on gymnasium's vector CartPole (``GymnasiumEnv``, its
  ``vector_entry_point``, numpy acting) at the same N.

Sides alternate within each round (a loaded machine slows them alike); the table gives the median env steps/s
over rounds and the ratios ``rl_gymnax / limit`` (goal >= 0.7) and ``rl_gymnax / rl_gymnasium`` (goal > 1)::

    python benchmarks/device_env.py --envs 1024,4096 --steps 64 --rounds 5

``--parts`` times the env alone instead (`parts`): the backend's jitted step per call and its compute inside
a scan, gymnax's bare ``step_env`` and gymnasium's vector step, in microseconds per vector step::

    python benchmarks/device_env.py --parts --envs 1024,4096

``--brax NAME`` measures the brax backend instead (``env.backend: brax``, brax's env ``NAME`` on its spring
pipeline, continuous PPO acting): ``rl_brax`` against its limit, the same two sides as above (no gymnasium side:
brax's physics is not gymnasium's MuJoCo)::

    python benchmarks/device_env.py --brax reacher --envs 256,1024 --steps 32 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from rlightning.env import RolloutWorker  # noqa: E402
from rlightning.env.gym_env import GymnasiumEnv  # noqa: E402
from rlightning.env.gymnax_env import BraxEnv, GymnaxEnv  # noqa: E402
from rlightning.policy.algorithms.ppo import PPOPolicy  # noqa: E402
from rlightning.utils.config import EnvConfig, PolicyConfig  # noqa: E402


def _worker(env_cls: type, config: EnvConfig) -> RolloutWorker:
    worker = RolloutWorker(env_cls, config)
    factory = PPOPolicy.acting_copy_factory(PolicyConfig(type="ppo", hidden_sizes=[64, 64]), worker.get_metadata(), 0)
    worker.attach_policy(factory)
    worker.reset(seed=0)
    return worker


def _limit_loop(worker: RolloutWorker) -> Callable[[int], None]:
    """The env's jitted step with the worker's policy and nothing else (the device env's limit)."""
    env, policy = worker.env, worker.policy
    from_dlpack, to_jax = torch.from_dlpack, env._jax.dlpack.from_dlpack  # noqa: SLF001
    dtype = torch.int32 if env._discrete else torch.float32  # noqa: SLF001

    def run(steps: int) -> None:
        obs = worker.current_env_ret.observation
        carry = env._carry  # noqa: SLF001
        for _ in range(steps):
            action = policy.compute_actions(obs, deterministic=False)["action"]
            (obs_j, _scalars), carry = env._step_fn(carry, to_jax(action.to(dtype).contiguous()))  # noqa: SLF001
            obs = from_dlpack(obs_j)
        env._carry = carry  # noqa: SLF001

    return run


def measure(num_envs: int, steps: int, rounds: int) -> Dict[str, List[float]]:
    """Env steps/s of each side, one figure per round."""
    gymnax = _worker(GymnaxEnv, EnvConfig(name="CartPole-v1", backend="gymnax", num_envs=num_envs))
    gym_vec = _worker(GymnasiumEnv, EnvConfig(name="CartPole-v1", num_envs=num_envs))
    limit = _limit_loop(gymnax)
    sides: Dict[str, Callable[[], None]] = {
        "rl_gymnax": lambda: gymnax.collect(steps),
        "limit": lambda: limit(steps),
        "rl_gymnasium": lambda: gym_vec.collect(steps),
    }
    out = _alternate(sides, num_envs * steps, rounds)
    gymnax.close()
    gym_vec.close()
    return out


def _alternate(sides: Dict[str, Callable[[], None]], env_steps: int, rounds: int) -> Dict[str, List[float]]:
    """Env steps/s of each side (``env_steps`` a call), the sides alternating in each round, after a warm-up call
    of each (JIT compilation, first allocations)."""
    for run in sides.values():
        run()
    out: Dict[str, List[float]] = {side: [] for side in sides}
    for _ in range(rounds):
        for side, run in sides.items():
            t0 = time.perf_counter()
            run()
            out[side].append(env_steps / (time.perf_counter() - t0))
    return out


def measure_brax(name: str, num_envs: int, steps: int, rounds: int) -> Dict[str, List[float]]:
    """Env steps/s of the brax backend's rollout and of its limit, one figure per round."""
    config = EnvConfig(name=name, backend="brax", num_envs=num_envs, env_kwargs={"backend": "spring"})
    worker = _worker(BraxEnv, config)
    limit = _limit_loop(worker)
    sides: Dict[str, Callable[[], None]] = {"rl_brax": lambda: worker.collect(steps), "limit": lambda: limit(steps)}
    out = _alternate(sides, num_envs * steps, rounds)
    worker.close()
    return out


def parts(num_envs: int, repeats: int = 5) -> Dict[str, float]:
    """Microseconds per vector step of the env alone (no policy): the backend's jitted step called once
    (dispatch + compute, as a rollout calls it), the same step's compute inside one ``lax.scan`` of 100
    steps, gymnax's bare vmapped ``step_env`` in such a scan (no autoreset, no keys), and gymnasium's vector
    CartPole ``step``; what bounds the device env on this machine, apart from the policy."""
    import timeit

    import gymnasium as gym
    import jax
    import jax.numpy as jnp
    import numpy as np

    from rlightning.env.gymnax_env import _vector_functions, make_gymnax

    env, params = make_gymnax("CartPole-v1")
    reset, step = _vector_functions(env, params)
    obs, carry = reset(jax.random.PRNGKey(0), num_envs)
    # Random actions (a fixed draw per step of the scan): the episodes end at different steps, as in a rollout.
    actions = jax.random.bernoulli(jax.random.PRNGKey(2), 0.5, (100, num_envs)).astype(jnp.int32)
    action, limit = actions[0], jnp.int32(500)

    def best(fn: Callable[[], Any], number: int) -> float:
        fn()
        return min(timeit.repeat(fn, number=number, repeat=repeats)) / number * 1e6

    @jax.jit
    def scan_step(c: Any) -> Any:
        return jax.lax.scan(lambda c, a: (step(c, a, limit)[1], None), c, actions)[0]

    bare = jax.vmap(lambda s, a, k: env.step_env(k, s, a, params)[1], in_axes=(0, 0, None))
    key = jax.random.PRNGKey(1)

    @jax.jit
    def scan_bare(s: Any) -> Any:
        return jax.lax.scan(lambda s, a: (bare(s, a, key), None), s, actions)[0]

    vec = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")
    vec.reset(seed=0)
    act_np = np.asarray(actions[0]).astype(np.int64)
    out = {
        "jitted step, one call": best(lambda: jax.block_until_ready(step(carry, action, limit)), 200),
        "its compute (in a scan)": best(lambda: jax.block_until_ready(scan_step(carry)), 5) / 100,
        "bare step_env (in a scan)": best(lambda: jax.block_until_ready(scan_bare(carry[1])), 5) / 100,
        "gymnasium vector step": best(lambda: vec.step(act_np), 200),
    }
    vec.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", default="1024,4096", help="comma-separated env counts")
    parser.add_argument("--steps", type=int, default=64, help="vector steps per timed rollout")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per env count")
    parser.add_argument("--parts", action="store_true", help="time the env alone (see `parts`) instead of rollouts")
    parser.add_argument("--brax", default="", help="a brax env: the brax backend against its limit instead")
    args = parser.parse_args()
    torch.set_num_threads(1)
    envs = [int(x) for x in args.envs.split(",")]
    if args.brax:
        lines = [
            f"torch {torch.__version__}, brax {args.brax} (spring pipeline), continuous PPO acting; env steps/s, "
            f"median of {args.rounds}",
            "| N | rl_brax | limit | brax / limit |",
            "|---|---|---|---|",
        ]
        raw = _rows(
            lines,
            envs,
            lambda n: measure_brax(args.brax, n, args.steps, args.rounds),
            lambda n, f: f"| {n} | {f['rl_brax']:,.0f} | {f['limit']:,.0f} | {f['rl_brax'] / f['limit']:.2f} |",
        )
        title = f"The brax backend ({args.brax}) against its limit: the env's jitted step with the same policy"
        _save("device_env_brax", title, lines, {"env": args.brax, "steps": args.steps, "env_steps_per_s": raw})
        return
    if args.parts:
        lines = ["us per vector step of CartPole, no policy (best of 5)", "| N | " + " | ".join(PARTS) + " |"]
        lines.append("|---" * (len(PARTS) + 1) + "|")
        raw = {}
        for n in (int(x) for x in args.envs.split(",")):
            raw[n] = parts(n)
            lines.append(f"| {n} | " + " | ".join(f"{raw[n][k]:.1f}" for k in PARTS) + " |")
            print(lines[-1], flush=True)
        title = "The device env's step on this machine: dispatch, compute, autoreset, gymnasium"
        _save("device_env_parts", title, lines, raw)
        return
    lines = [
        f"torch {torch.__version__}, device env on {GymnaxEnv.__name__}; env steps/s, median of {args.rounds}",
        "| N | rl_gymnax | limit | rl_gymnasium | gymnax / limit (>= 0.7) | gymnax / gymnasium (> 1) |",
        "|---|---|---|---|---|---|",
    ]

    def row(n: int, f: Dict[str, float]) -> str:
        a, lim, g = f["rl_gymnax"], f["limit"], f["rl_gymnasium"]
        return f"| {n} | {a:,.0f} | {lim:,.0f} | {g:,.0f} | {a / lim:.2f} | {a / g:.2f} |"

    raw = _rows(lines, envs, lambda n: measure(n, args.steps, args.rounds), row)
    _save(
        "device_env",
        "The device-resident env (gymnax CartPole through DLPack) against its limit and gymnasium",
        lines,
        {"steps": args.steps, "rounds": args.rounds, "env_steps_per_s": raw},
    )


def _rows(lines: List[str], envs: List[int], measure_one: Callable, row: Callable) -> Dict[int, Any]:
    """Print the table head ``lines``, then measure each env count (``measure_one(n)``: figures per side) and
    append and print its row (``row(n, median of each side)``); returns the figures by env count."""
    print("\n".join(lines), flush=True)
    raw = {}
    for n in envs:
        raw[n] = measure_one(n)
        lines.append(row(n, {k: statistics.median(v) for k, v in raw[n].items()}))
        print(lines[-1], flush=True)
    return raw


PARTS = ("jitted step, one call", "its compute (in a scan)", "bare step_env (in a scan)", "gymnasium vector step")


def _save(name: str, title: str, lines: List[str], data: Dict[str, Any]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks.report import save

    save(name, title, "\n".join(lines), data=data)


if __name__ == "__main__":
    main()
