"""`WorkerLogRelay`: Ray's forwarded worker lines, rate-limited and deduplicated (fake clock, no Ray)."""

from __future__ import annotations

import logging

import pytest

from rlightning.notebook.worker_logs import WorkerLogRelay


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _relay(**kwargs):
    clock, timers = Clock(), []
    relay = WorkerLogRelay(clock=clock, timer=lambda delay, fn: timers.append((delay, fn)), **kwargs)
    return relay, clock, timers


def _batch(lines, pid=7, name="EnvWorker", is_err=False, ip="127.0.0.1"):
    return {"pid": pid, "actor_name": name, "lines": lines, "is_err": is_err, "ip": ip, "localhost": "127.0.0.1"}


def test_at_most_n_lines_a_second_then_a_summary(capsys):
    relay, clock, timers = _relay(lines_per_s=3, dedup_window_s=0)
    relay(_batch([f"line {w}" for w in "abcdefgh"]))
    out = capsys.readouterr().out.splitlines()
    assert out == ["(EnvWorker pid=7) line a", "(EnvWorker pid=7) line b", "(EnvWorker pid=7) line c"]
    assert len(timers) == 1 and timers[0][0] == pytest.approx(1.0)  # one summary, due when the second ends
    clock.t += 1.0
    timers[0][1]()
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and out[0].startswith("(5 worker log lines suppressed: more than 3 a second")
    relay(_batch(["line x"], pid=8, name="", is_err=True, ip="10.0.0.2"))  # a new second: shown again
    assert capsys.readouterr().err == "(pid=8, ip=10.0.0.2) line x\n"
    assert relay.counts == {"lines": 9, "shown": 4, "suppressed": 5, "repeated": 0}


def test_repeats_are_folded_across_workers_then_counted(capsys):
    relay, clock, _ = _relay(lines_per_s=100, dedup_window_s=5)
    for step in range(10):
        relay(_batch([f"reward {step}.5 at step {step}"], pid=step))
    assert capsys.readouterr().out.splitlines() == ["(EnvWorker pid=0) reward 0.5 at step 0"]
    clock.t += 6
    relay(_batch(["something else"]))
    assert capsys.readouterr().out.splitlines() == [
        "(EnvWorker pid=9) reward 9.5 at step 9 [repeated 9x across cluster]",
        "(EnvWorker pid=7) something else",
    ]
    relay(_batch(["something else"]))
    relay.flush()
    assert capsys.readouterr().out == "(EnvWorker pid=7) something else [repeated 1x across cluster]\n"


def test_ray_own_messages_go_to_the_logger(capsys, caplog):
    relay, _, _ = _relay()
    with caplog.at_level(logging.INFO, logger="rlightning"):
        relay({"pid": "raylet", "lines": ["[Ray] a worker was killed"], "is_err": True})
        relay({"pid": "autoscaler", "lines": ["Resized to 4 CPUs."], "is_err": False})
    shown = capsys.readouterr()
    assert shown.out == shown.err == ""
    assert [r.getMessage() for r in caplog.records] == [
        "ray raylet: [Ray] a worker was killed",
        "ray autoscaler: Resized to 4 CPUs.",
    ]


def test_bad_rates_are_refused():
    with pytest.raises(ValueError, match="lines_per_s must be a number > 0, got 0"):
        WorkerLogRelay(0)
    with pytest.raises(ValueError, match="dedup_window_s must be a number >= 0"):
        WorkerLogRelay(5, dedup_window_s=-1)
