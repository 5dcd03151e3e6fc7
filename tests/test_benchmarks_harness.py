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


def sampling(ours_ray, ours_local, rllib, torchrl, vep, sync, case="2x64"):
    return [
        m("sampling", case, "rl_ray", ours_ray),
        m("sampling", case, "rl_local", ours_local),
        m("sampling", case, "rllib", rllib),
        m("sampling", case, "torchrl", torchrl),
        m("sampling", case, "limit_vep", vep),
        m("sampling", case, "limit_sync", sync),
    ]


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


def test_every_goal_names_sides_of_its_item():
    for g in report.GOALS:
        keys = {s.key for s in report.ITEMS[g.item].sides}
        assert g.ours in keys
        assert g.ref == "limit" or g.ref in keys


@pytest.mark.skipif(not os.path.exists("/proc/loadavg"), reason="reads /proc")
def test_load_probe_counts_other_processes_not_ours():
    probe = LoadProbe()
    sum(i * i for i in range(200_000))  # our own CPU time is not "other"
    load = probe.finish()
    assert set(load) >= {"wall_s", "loadavg_before", "loadavg_after", "other_cpu_s", "other_cores", "quiet"}
    assert load["other_cpu_s"] >= 0.0
