"""Load: 16 env workers x 64 sub-environments on logical CPUs, memory sampled throughout stays bounded."""

from __future__ import annotations

import json

import pytest

from benchmarks.load import fitted_growth, run_load, table, verdict


def test_fitted_growth_and_verdict_catch_a_leak():
    flat = [{"iteration": i, "driver_rss": 4e8, "actor_rss": 6e9, "store_bytes": 1e6} for i in range(0, 200, 5)]
    assert verdict(flat)["bounded"]
    leaky = [dict(s, actor_rss=6e9 + s["iteration"] * 3e6) for s in flat]  # 3 MB per iteration
    v = verdict(leaky)
    assert not v["bounded"] and not v["actor_rss"]["bounded"] and v["driver_rss"]["bounded"]
    assert fitted_growth(leaky, "actor_rss")["per_iteration"] == pytest.approx(3e6)
    store = [dict(s, store_bytes=s["iteration"] * 1e6) for s in flat]
    assert not verdict(store)["store_bytes"]["bounded"]


class _Earlier:
    def ping(self):
        return True


@pytest.mark.ray
@pytest.mark.slow
def test_sixteen_by_sixty_four_for_hundreds_of_iterations_stays_bounded(tmp_path, ray_runtime):
    # One PPO update of one minibatch per iteration (the preset's 4 x 4 took a quarter of each iteration): the
    # load is the per-step traffic through Ray and the weights synced after every update, not the optimizer.
    one_update = ["policy.update_epochs=1", "policy.num_minibatches=1"]
    # An actor the job had before the run (as Ray Data leaves its coordinator and stats actors in a shared
    # runtime) is not the run's: it stays out of the samples.
    earlier = ray_runtime.remote(num_cpus=0)(_Earlier).remote()
    ray_runtime.get(earlier.ping.remote())
    result = run_load(
        workers=16,
        num_envs=64,
        iterations=200,
        rollout_steps=2,
        sample_every=5,
        run_dir=str(tmp_path),
        overrides=one_update,
    )
    print(table(result))
    (tmp_path / "load.json").write_text(json.dumps(result, indent=1))
    assert result["env_steps"] == 16 * 64 * 2 * 200
    assert result["actors_before"] >= 1
    # 16 env + eval + train + storage actors, the same processes throughout (nothing restarted or leaked).
    # Ray may start workers of its own for a while under load (the raylet says so); they are listed, and
    # must not be ours (the actors of the first sample stay) nor outlive the run (the last sample has none).
    samples = [s["actors"] for s in result["samples"]]
    ours = set.intersection(*(set(a) for a in samples))  # in every sample: lived through the whole run
    assert len(ours) == 19, f"{len(ours)} actor processes lived through the run, expected 19: {samples[0]}"
    titles = {samples[0][pid] for pid in ours}
    extra = {pid: t for a in samples for pid, t in a.items() if pid not in ours}
    leaked = {pid: t for pid, t in samples[-1].items() if pid not in ours and t in titles}
    assert not leaked, f"a second process of one of the run's actor classes at the end: {leaked}"
    print("processes of the job that came and went:", extra or "none")
    assert result["verdict"]["bounded"], table(result)
    ray_runtime.kill(earlier)
