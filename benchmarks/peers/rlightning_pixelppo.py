"""rlightning PPO end to end on 84x84x4 uint8 frames: the ``atari_ppo`` preset's PPO on the synthetic pixel env.

The settings of `pixelppo_common` (CleanRL's Atari PPO, 8 sub-envs x 128
steps, the built-in Nature CNN with frames scaled inside the network).
``--mode local``: one env worker of 8 sub-envs in this process, acting with its
policy copy; ``--mode ray``: the preset's layout, 2 env workers x 4 sub-envs as
Ray actors acting with their copies. A repeat: env steps per second of whole
``engine.step()`` iterations (rollout, transitions stored, GAE, 16 gradient
steps, weight sync) over a window, after one warm-up iteration.
"""

from __future__ import annotations

import os

import _common as c

c.repo_root_on_path()  # workers import benchmarks.pixel_env (the env's entry point)
c.set_threads()

import pixelppo_common as pc  # noqa: E402

from benchmarks.pixel_env import register  # noqa: E402


def build(mode: str):
    from rlightning.utils.builders import build_run
    from rlightning.utils.config import apply_overrides, load_preset

    workers = 2 if mode == "ray" else 1
    cfg = apply_overrides(
        load_preset("atari_ppo"),
        [
            f"env.name={register()}",
            "env.env_kwargs={}",
            "env.wrappers=[]",
            f"env.num_workers={workers}",
            f"env.num_envs={pc.NUM_ENVS // workers}",
            f"cluster.remote_env={str(mode == 'ray').lower()}",
            f"train.rollout_steps={pc.ROLLOUT}",
            f"buffer.capacity={pc.BATCH}",
            f"policy.update_epochs={pc.EPOCHS}",
            f"policy.num_minibatches={pc.MINIBATCHES}",
            f"policy.optim.lr={pc.LR}",
            "policy.optim.anneal_lr=false",
            f"policy.gamma={pc.GAMMA}",
            f"policy.gae_lambda={pc.GAE_LAMBDA}",
            f"policy.clip_coef={pc.CLIP}",
            f"policy.ent_coef={pc.ENT}",
            f"policy.vf_coef={pc.VF}",
            f"policy.optim.max_grad_norm={pc.MAX_GRAD_NORM}",
            "log.progress=false",
            "log.jsonl=false",
            f"log.run_dir={os.environ.get('BENCH_TMP', '/tmp')}/rlightning-bench-runs",
        ],
    )
    return build_run(cfg).engine


def main() -> None:
    a = c.args(lambda p: p.add_argument("--mode", default="local", choices=["local", "ray"]))
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import acquire_ray

        acquire_ray(num_cpus=4, include_dashboard=False, log_to_driver=False)
    engine = build(a.mode)

    def iteration() -> int:
        before = engine.env_steps
        engine.step()
        return engine.env_steps - before

    c.begin(pc.CASE)
    rates = c.timed_rate(iteration, a.seconds, a.repeats)
    c.result(pc.CASE, rates, "env steps/s", env_steps=engine.env_steps, iterations=engine.iteration)
    engine.close()
    if a.mode == "ray":
        from rlightning.utils.ray.runtime import release_ray

        release_ray()


if __name__ == "__main__":
    main()
