"""The benchmark harness's bookkeeping on synthetic figures: ratios, goals, the table, the load probe.

No venv is created and nothing is timed here.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import report  # noqa: E402
from benchmarks.harness.load import LoadProbe  # noqa: E402


def m(item, case, side, values, unit="env steps/s", busy=False, **extras):
    return {"item": item, "case": case, "side": side, "values": values, "unit": unit, "busy": busy, "extras": extras}


def sampling(ours_ray, ours_local, rllib, torchrl, vep, sync, case="2x64", floor=None, step=None):
    return (
        [m("sampling", case, "ray_floor", floor)] * (floor is not None)
        + [m("sampling", case, "rl_ray_step", step)] * (step is not None)
        + [
            m("sampling", case, "rl_ray", ours_ray),
            m("sampling", case, "rl_local", ours_local),
            m("sampling", case, "rllib", rllib),
            m("sampling", case, "torchrl", torchrl),
            m("sampling", case, "limit_vep", vep),
            m("sampling", case, "limit_sync", sync),
        ]
    )


def verdict(vs, side, ref, case="2x64"):
    (v,) = [v for v in vs if v["side"] == side and v["ref"] == ref and v["case"] == case]
    return v


def test_stats_min_median_max():
    assert report.stats([3.0, 1.0, 2.0]) == {"min": 1.0, "median": 2.0, "max": 3.0, "n": 3}
    assert report.stats([]) is None


def test_throughput_goals_use_medians_and_the_best_limit():
    ms = sampling([10, 30, 20], [80, 100, 90], [5, 10, 15], [4, 5, 6], [100, 100, 100], [200, 40, 50])
    vs = report.judge(ms)
    assert verdict(vs, "rl_ray", "rllib")["ratio"] == pytest.approx(2.0)
    assert verdict(vs, "rl_ray", "rllib")["met"]
    assert verdict(vs, "rl_ray", "torchrl")["ratio"] == pytest.approx(4.0)
    assert not verdict(vs, "rl_ray", "torchrl")["met"]
    # limit = the faster of the two gymnasium vectorisations (by median): 100 beats 50
    assert verdict(vs, "rl_local", "limit")["ratio"] == pytest.approx(0.9)
    assert verdict(vs, "rl_local", "limit")["met"]
    assert verdict(vs, "rl_ray", "limit")["ratio"] == pytest.approx(0.2)
    assert not verdict(vs, "rl_ray", "limit")["met"]


def test_time_goals_are_at_most():
    ms = [
        m("coldstart", "first iteration", "rl", [4.0, 5.0, 6.0], "s"),
        m("coldstart", "first iteration", "rllib", [10.0, 11.0], "s"),
        m("ppo", "solve", "rl_ray", [80.0], "s"),
        m("ppo", "solve", "rllib", [100.0], "s"),
    ]
    vs = report.judge(ms)
    cold = verdict(vs, "rl", "rllib", "first iteration")
    assert cold["ratio"] == pytest.approx(5.0 / 10.5) and cold["met"]
    ppo = verdict(vs, "rl_ray", "rllib", "solve")
    assert ppo["ratio"] == pytest.approx(0.8) and not ppo["met"]


def test_missing_or_failed_sides_give_no_verdict():
    ms = [m("coldstart", "first iteration", "rl", [4.0], "s"), m("coldstart", "first iteration", "rllib", [], "s")]
    assert report.judge(ms) == []
    assert "failed" in report.markdown(ms, ["coldstart"])


def test_markdown_table_rows_ratios_and_marks():
    ms = sampling([10, 30, 20], [80, 100, 90], [5, 10, 15], [4, 5, 6], [100, 100, 100], [200, 40, 50])
    ms[2]["busy"] = True
    text = report.markdown(ms, ["sampling"])
    lines = [ln for ln in text.splitlines() if ln.startswith("| 2x64")]
    assert len(lines) == 6
    ray_row = lines[0]
    assert "| 10.0 | 20.0 | 30.0 |" in ray_row
    assert "2.00x" in ray_row and "4.00x" in ray_row and "0.20x" in ray_row
    assert ">= 2x RLlib: met" in ray_row and ">= 5x TorchRL: **not met**" in ray_row
    assert "RLlib EnvRunners (busy)" in lines[2]
    summary = report.goal_summary(ms)
    assert "| 1/1 |" in summary and "| 0/1 |" in summary
    json.dumps(report.judge(ms))  # the JSON the harness writes


def test_extras_shown_as_medians():
    ms = [
        m("ppo", "solve", "rl_ray", [80.0, 90.0], "s", env_steps=[1000, 3000], iterations=[5, 7]),
        m("ppo", "solve", "rllib", [100.0], "s", env_steps=[5000], iterations=[9]),
    ]
    row = [ln for ln in report.markdown(ms, ["ppo"]).splitlines() if ln.startswith("| solve")][0]
    assert "| 2000 | 6 |" in row


def test_quick_cases_are_cases_and_quick_keeps_every_goal_side():
    for item in report.ITEMS.values():
        assert set(item.quick_cases) <= set(item.cases)
        assert set(item.floor_of) <= {s.key for s in item.sides}
    for g in report.GOALS:
        side = next(s for s in report.ITEMS[g.item].sides if s.key == g.ours)
        assert not side.full_only
    # items --quick leaves out (the off-policy training runs: minutes per side) are judged in full runs only
    assert "offpolicy" in {n for n, it in report.ITEMS.items() if not it.quick_default}


def test_every_goal_names_sides_of_its_item():
    for g in report.GOALS:
        keys = {s.key for s in report.ITEMS[g.item].sides}
        assert g.ours in keys
        assert g.ref == "limit" or g.ref in keys


def test_ray_floor_row_and_ratios():
    ms = sampling(
        [60, 70, 80],
        [80, 100, 90],
        [5, 10, 15],
        [4, 5, 6],
        [100, 100, 100],
        [200, 40, 50],
        floor=[40, 50],
        step=[10, 30, 20],
    )
    text = report.markdown(ms, ["sampling"])
    head = [ln for ln in text.splitlines() if ln.startswith("| case")][0]
    assert head.endswith("| / RLlib | / TorchRL | / limit | / Ray floor | goals |")
    rows = {ln.split(" | ")[1]: ln for ln in text.splitlines() if ln.startswith("| 2x64")}
    floor_row = rows["Ray floor of per-step calls: same calls as the row above, actors do no env work"]
    # the floor (median 45): / RLlib 4.5x, / TorchRL 9x, / limit 0.45x; no ratio to itself, no goals
    assert "| 4.50x | 9.00x | 0.45x |  |  |" in floor_row
    # the per-step Ray row (median 20) / floor (45), no goals; the preset's Ray row and local workers get no
    # floor ratio (one call per rollout is not under the per-step floor)
    assert "| 2.00x | 4.00x | 0.20x | 0.44x |  |" in rows["rlightning, env workers on Ray, eval worker acting per step"]
    assert (
        "| 14.00x | 0.70x |  | >= 2x RLlib: met"
        in rows["rlightning, env workers on Ray (acting in the env workers: the preset)"]
    )
    assert "| 0.90x |  | >= 0.8x limit: met |" in rows["rlightning, local workers"]
    # the floor is neither a limit nor a goal's reference
    assert verdict(report.judge(ms), "rl_ray", "limit")["ratio"] == pytest.approx(0.7)
    summary = report.floor_summary(ms, ["sampling"])
    assert "| 2x64 | 45.0 env steps/s | 0.45x | 0.44x |" in summary
    assert report.floor_summary(sampling([1], [1], [1], [1], [1], [1]), ["sampling"]) == ""


def test_unsolved_ppo_runs_bound_the_verdict():
    def ppo(ours, ours_solved, ref, ref_solved):
        return [
            m("ppo", "solve", "rl_ray", [ours], "s", solved=[ours_solved], capped=[not ours_solved]),
            m("ppo", "solve", "rllib", [ref], "s", solved=[ref_solved], capped=[not ref_solved]),
        ]

    def goal(ms):
        return [v for v in report.judge(ms) if v["item"] == "ppo"]

    assert goal(ppo(50.0, True, 100.0, True))[0]["met"]
    assert not goal(ppo(90.0, False, 100.0, True))[0]["met"]  # already above 0.7x: not met whatever comes
    assert goal(ppo(50.0, False, 100.0, True)) == []  # could still go either way
    assert goal(ppo(50.0, True, 100.0, False))[0]["met"]  # RLlib needs even longer
    assert goal(ppo(90.0, True, 100.0, False)) == []
    assert goal(ppo(50.0, False, 100.0, False)) == []
    text = report.markdown(ppo(50.0, False, 100.0, True), ["ppo"])
    assert "rlightning preset as shipped (cartpole_ppo / lunar_ppo: env workers on Ray) (not solved: time cap)" in text


def test_coldstart_phases_are_columns():
    phases = dict(imports_s=[3.0], ray_start_s=[6.0], build_s=[9.5], first_step_s=[2.25])
    ms = [
        m("coldstart", "first iteration", "rl", [20.75], "s", **phases),
        m("coldstart", "first iteration", "rllib", [30.0], "s", imports_s=[5.0]),
    ]
    lines = [ln for ln in report.markdown(ms, ["coldstart"]).splitlines() if ln.startswith("| ")]
    assert "| imports_s | ray_start_s | build_s | first_step_s |" in lines[0]
    assert "| s | 3 | 6 | 9.5 | 2.25 |" in lines[1]
    assert "| s | 5 | - | - | - |" in lines[2]


def test_phase_seconds():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))
    import _common

    assert _common.phase_seconds(10.0, [11.0, 13.5, 14.0]) == [1.0, 2.5, 0.5]


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="reads /proc")
def test_load_probe_counts_other_processes_not_ours():
    probe = LoadProbe()
    sum(i * i for i in range(200_000))  # our own CPU time is not "other"
    load = probe.finish()
    assert set(load) >= {"wall_s", "loadavg_before", "loadavg_after", "other_cpu_s", "other_cores", "quiet"}
    assert load["other_cpu_s"] >= 0.0


def test_quick_shared_processes_cover_cold_start_ppo_and_ray_sampling():
    from argparse import Namespace

    from benchmarks.harness import main

    ours, rllib = report.QUICK_SHARED
    assert ours.slots(["1x8", "2x64"]) == {
        "first iteration": ("coldstart", "rl", "first iteration"),
        "solve": ("ppo", "rl_ray", "solve"),
        "ray:1x8": ("sampling", "rl_ray", "1x8"),
        "ray:2x64": ("sampling", "rl_ray", "2x64"),
        "ray-step:1x8": ("sampling", "rl_ray_step", "1x8"),
        "ray-step:2x64": ("sampling", "rl_ray_step", "2x64"),
        "floor:1x8": ("sampling", "ray_floor", "1x8"),
        "floor:2x64": ("sampling", "ray_floor", "2x64"),
    }
    assert ("sampling", "rllib") in rllib.sides() and ("coldstart", "rllib") in rllib.sides()
    for sh in report.QUICK_SHARED:  # every member is a real side of its item
        for item, key in sh.sides():
            assert key in {s.key for s in report.ITEMS[item].sides}
    quick = Namespace(quick=True, proc_repeats=1)
    items = list(report.ITEMS)
    assert main.shared_in_use(quick, items, []) == list(report.QUICK_SHARED)
    # a side or item left out, several fresh processes per case, or full mode: every side runs alone
    assert main.shared_in_use(quick, ["sampling", "ppo"], []) == []
    assert main.shared_in_use(quick, items, ["rl_ray"]) == []
    assert main.shared_in_use(Namespace(quick=True, proc_repeats=3), items, []) == []
    assert main.shared_in_use(Namespace(quick=False, proc_repeats=1), items, []) == []


def test_measure_side_takes_a_shared_result_without_launching(monkeypatch):
    from argparse import Namespace

    from benchmarks.harness import main

    monkeypatch.setattr(main, "launch", lambda *a, **k: pytest.fail("launched"))
    args = Namespace(quick=True, repeats=3, proc_repeats=1, seconds=0.5, retries=0, ppo_cap=20.0)
    res = {"values": [21.0], "unit": "s", "solved": False, "load": {"quiet": True, "other_cores": 0.0}}
    item = report.ITEMS["ppo"]
    side = next(s for s in item.sides if s.key == "rl_ray")
    (got,) = main.measure_side(item, side, args, {"solve": res})
    assert got["values"] == [21.0] and got["extras"]["solved"] == [False] and not got["busy"]


def test_pixel_ppo_end_to_end_is_judged_against_rllib_and_sb3():
    case = "8 envs x 128 steps"
    ms = [
        m("pixelppo", case, "rl_local", [90.0, 100.0, 110.0]),
        m("pixelppo", case, "rl_ray", [80.0]),
        m("pixelppo", case, "rllib", [40.0, 45.0, 60.0]),
        m("pixelppo", case, "sb3", [95.0, 105.0, 120.0]),
    ]
    vs = report.judge(ms)
    assert verdict(vs, "rl_local", "rllib", case)["ratio"] == pytest.approx(100 / 45)
    assert verdict(vs, "rl_local", "rllib", case)["met"]  # >= 2x RLlib
    assert verdict(vs, "rl_local", "sb3", case)["ratio"] == pytest.approx(100 / 105)
    assert not verdict(vs, "rl_local", "sb3", case)["met"]  # >= 1x SB3
    assert not report.ITEMS["pixelppo"].quick_default  # minutes per side: full runs or --only


def test_env_steps_goal_compares_the_medians_of_the_extra():
    ms = [
        m("ppo", "solve", "rl_sb3hp", [10.0, 12.0, 11.0], "s", env_steps=[30_000, 50_000, 36_000], solved=[True] * 3),
        m("ppo", "solve", "sb3", [20.0, 22.0, 21.0], "s", env_steps=[25_000, 40_000, 30_000], solved=[True] * 3),
    ]
    vs = [v for v in report.judge(ms) if v["side"] == "rl_sb3hp"]
    (steps,) = [v for v in vs if v["metric"] == "env_steps"]
    (secs,) = [v for v in vs if v["metric"] == ""]
    assert steps["ratio"] == pytest.approx(36_000 / 30_000) and steps["met"]  # <= 1.2x
    assert secs["ratio"] == pytest.approx(11.0 / 21.0) and secs["met"]
    ms[0]["extras"]["env_steps"] = [40_000, 40_000, 37_000]
    (steps,) = [v for v in report.judge(ms) if v["side"] == "rl_sb3hp" and v["metric"] == "env_steps"]
    assert steps["ratio"] == pytest.approx(40_000 / 30_000) and not steps["met"]
    row = [ln for ln in report.markdown(ms, ["ppo"]).splitlines() if "zoo hyperparameters" in ln][0]
    assert "env_steps <= 1.2x SB3: **not met**" in row and "<= 1x SB3: met" in row
    assert "env_steps <= 1.2x SB3 | 0/1 | 1.33x (solve)" in report.goal_summary(ms)


def test_sides_run_only_their_cases():
    from argparse import Namespace

    from benchmarks.harness import main

    item = report.ITEMS["ppo"]
    sides = {s.key: s for s in item.sides}
    full = Namespace(quick=False, cases="")
    assert main.side_cases(item, sides["sb3"], full) == ["solve", "lunar"]
    assert main.side_cases(item, sides["rllib"], full) == ["solve"]  # RLlib's script runs CartPole only
    assert main.side_cases(item, sides["sb3"], Namespace(quick=True, cases="")) == ["solve"]
    assert main.side_cases(item, sides["sb3"], Namespace(quick=False, cases="lunar")) == ["lunar"]
    assert main.side_cases(item, sides["rl_best"], Namespace(quick=False, cases="lunar")) == []


def test_masked_ppo_is_judged_against_unmasked_and_pixel_ppo_against_its_floor():
    ms = [
        m("maskppo", "local 2x8", "masked", [850.0, 900.0, 950.0]),
        m("maskppo", "local 2x8", "unmasked", [1000.0, 1000.0]),
        m("maskppo", "ray 2x8", "masked", [700.0]),
        m("maskppo", "ray 2x8", "unmasked", [1000.0]),
        m("pixelppo", "8 envs x 128 steps", "rl_local", [100.0]),
        m("pixelppo", "8 envs x 128 steps", "floor", [125.0]),
    ]
    vs = report.judge(ms)
    local, ray = verdict(vs, "masked", "limit", "local 2x8"), verdict(vs, "masked", "limit", "ray 2x8")
    assert local["ratio"] == pytest.approx(0.9) and local["met"]  # within 10 % of unmasked
    assert ray["ratio"] == pytest.approx(0.7) and not ray["met"]
    text = report.markdown(ms, ["maskppo", "pixelppo"])
    assert "/ unmasked" in text and ">= 0.9x unmasked: **not met**" in text
    floor_col = [ln for ln in text.splitlines() if ln.startswith("| 8 envs") and "local env worker" in ln][0]
    assert "0.80x" in floor_col  # rlightning / the plain torch floor
    assert not report.ITEMS["maskppo"].quick_default


def test_sides_left_out_build_no_peer_venv(monkeypatch):
    """``--sides`` naming only rlightning's sides builds no peer venv (it built RLlib's, TorchRL's and SB3's)."""
    from benchmarks.harness import main as harness

    class Stop(Exception):
        pass

    def stop(name):
        raise Stop

    built = []
    monkeypatch.setattr(harness.venvs, "ensure", lambda name, log=None: built.append(name))
    monkeypatch.setattr(harness.venvs, "versions", stop)  # the step after the venvs: nothing is measured
    with pytest.raises(Stop):
        harness.main(["--quick", "--sides", "rl_local,limit_vep,rl_ray"])
    assert built == []
    with pytest.raises(Stop):
        harness.main(["--quick", "--only", "sampling", "--sides", "rl_local,rllib"])
    assert built == ["rllib"]
