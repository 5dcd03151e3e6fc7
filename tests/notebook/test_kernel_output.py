"""What a notebook cell shows, read from a real Jupyter kernel (jupyter_client): short user errors that
still fail the cell, and the output of Ray actors reaching the running cell, rate-limited."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _execute(kc: Any, code: str, timeout: float = 180.0) -> Tuple[Dict[str, Any], List[Dict[str, Any]]]:
    """Run one cell; returns its execute reply's content and the iopub messages of that cell."""
    msg_id = kc.execute(code)
    while True:
        reply = kc.get_shell_msg(timeout=timeout)
        if reply["parent_header"].get("msg_id") == msg_id:
            break
    outputs: List[Dict[str, Any]] = []
    while True:
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return reply["content"], outputs
        outputs.append(msg)


def _text(outputs: List[Dict[str, Any]], name: str = "") -> str:
    streams = [m["content"] for m in outputs if m["msg_type"] == "stream"]
    return "".join(c["text"] for c in streams if not name or c["name"] == name)


@pytest.fixture(scope="module")
def kernel(tmp_path_factory):
    from jupyter_client.manager import start_new_kernel

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.pop("RAY_ADDRESS", None)
    env["RAY_DEDUP_LOGS"] = "1"
    env["RLIGHTNING_WARM_IMPORTS"] = "0"  # the tests build no run: no torch import while Ray starts
    cwd = tmp_path_factory.mktemp("kernel")
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(cwd), startup_timeout=120)
    try:
        yield kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


@pytest.mark.notebook
def test_a_user_error_is_short_and_still_fails_the_cell(kernel):
    reply, _ = _execute(
        kernel,
        "from rlightning.notebook.errors import install_short_errors\nassert install_short_errors()\n"
        "from rlightning.utils.config import TrainConfig\ntrain = TrainConfig()",
    )
    assert reply["status"] == "ok"

    reply, outputs = _execute(kernel, "train.rollout_step = 3")
    assert reply["status"] == "error" and reply["ename"] == "UnknownKeyError"
    assert "rollout_steps" in reply["evalue"]
    errors = [m["content"] for m in outputs if m["msg_type"] == "error"]
    assert len(errors) == 1, outputs  # the front end (and nbval) sees an error output, once
    assert errors[0]["ename"] == "UnknownKeyError" and "rollout_steps" in errors[0]["evalue"]
    shown = "\n".join(errors[0]["traceback"])
    assert "%tb shows the full traceback" in shown
    assert "Traceback" not in shown and "site-packages" not in shown and "config.py" not in shown
    assert _text(outputs) == ""  # nothing else printed

    _, outputs = _execute(kernel, "%tb")
    full = _text(outputs) + "".join("\n".join(m["content"].get("traceback", [])) for m in outputs)
    assert "rlightning/utils/config.py" in full and "UnknownKeyError" in full

    _, outputs = _execute(kernel, "from rlightning.notebook.errors import full_traceback\nprint(full_traceback())")
    text = _text(outputs, "stdout")
    assert text.startswith("Traceback (most recent call last)") and "rlightning/utils/config.py" in text

    reply, outputs = _execute(kernel, "def f():\n    return 1 / 0\nf()")  # any other error: IPython's own traceback
    assert reply["status"] == "error" and reply["ename"] == "ZeroDivisionError"
    assert len(reply["traceback"]) > 2 and "%tb shows" not in "\n".join(reply["traceback"])


@pytest.mark.notebook
@pytest.mark.ray
@pytest.mark.slow
def test_actor_output_reaches_the_running_cell_rate_limited(kernel):
    reply, outputs = _execute(
        kernel,
        "from rlightning.notebook import Lab\nlab = Lab.local(num_cpus=1, worker_log_lines_per_s=5)\n"
        "from rlightning.notebook.worker_logs import current_relay\nrelay = current_relay()\n"
        "assert relay is not None and relay.lines_per_s == 5",
    )
    assert reply["status"] == "ok", reply
    start = _text(outputs)
    assert "Started a local Ray instance" not in start and "token" not in start.lower()  # Ray's start-up: logger

    reply, outputs = _execute(
        kernel,
        "import ray, time\n"
        "@ray.remote(num_cpus=0)\n"
        "class Chatty:\n"
        "    def talk(self):\n"
        "        words = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel']\n"
        "        for a in words:\n"
        "            for b in words:\n"
        "                print('line', a, b, flush=True)\n"
        "        for i in range(30):\n"
        "            print(f'reward {i}.5 at step {i}', flush=True)\n"
        "        return True\n"
        "c = Chatty.remote()\n"
        "assert ray.get(c.talk.remote())\n"
        "deadline = time.time() + 60\n"
        "while relay.counts['lines'] < 94 and time.time() < deadline:\n"
        "    time.sleep(0.2)\n"
        "relay.flush()\n"
        "print('counts', relay.counts)",
    )
    assert reply["status"] == "ok", reply
    text = _text(outputs)
    lines = [line for line in text.splitlines() if line.startswith("(Chatty pid=")]
    assert "counts {'lines': " in text
    counts = eval(text.split("counts ", 1)[1].splitlines()[0])  # noqa: S307 - our own dict repr
    # every line the actor printed reached the relay (a loaded machine's Ray may log one more line of its own)
    assert counts["lines"] >= 94, counts
    assert counts["suppressed"] > 0 and counts["repeated"] >= 20, counts
    assert len(lines) == counts["shown"]  # what was shown went to this cell, and only that
    assert any("worker log lines suppressed" in line for line in text.splitlines())
    assert sum("reward" in line and "[repeated" in line for line in lines) <= 1  # repeats folded

    _, outputs = _execute(kernel, "lab.shutdown()")
    assert "(Chatty pid=" not in _text(outputs)
