"""Browser test of notebooks/01_quickstart.ipynb: JupyterLab + headless Chromium driven by Playwright.

JupyterLab serves a temporary copy of the notebook (with fewer training iterations, so the test
fits the CI budget); Chromium opens it, runs all cells from the Run menu, and the test checks that
the dashboard, BufferView and EpisodeTable widgets render, that their numbers change while the
engine runs, and that the browser console shows no widget errors. A screenshot is saved in the
test's temporary directory.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path
from typing import Dict, List

import pytest

from tests.support.browser import CHROMIUM_ARGS, find_chromium, jupyter_lab, shorten_notebook

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_quickstart.ipynb"
# Fewer iterations than the tutorial's 150 (which stop at return 475): enough to watch the widgets move.
SHORTEN = {"cfg.train.iterations = 150": "cfg.train.iterations = 30"}
DONE_TEXT = "Lab(shut down)"
RUN_TIMEOUT_S = 900
WIDGET_WORDS = ("widget", "ipywidgets", "model not found", "comm_id", "comm closed", "rlightning")

READ_WIDGETS = """() => {
  const text = (sel) => Array.from(document.querySelectorAll(sel)).map((e) => e.textContent.trim());
  return {
    dashboards: document.querySelectorAll('.rlightning-dashboard').length,
    buffer_views: document.querySelectorAll('.rlightning-buffer-view').length,
    episode_tables: document.querySelectorAll('.rlightning-episode-table').length,
    iteration: text('.rlightning-dashboard .rl-iteration'),
    size: text('.rlightning-buffer-view .rl-size'),
    written: text('.rlightning-buffer-view .rl-written'),
    env_steps: text('.rlightning-dashboard .rl-env-steps'),
    table_rows: document.querySelectorAll('.rlightning-episode-table tbody tr').length,
    outputs: text('.jp-OutputArea-output').join('\\n'),
  };
}"""


# An "Exception ignored in: ..." report is the interpreter's note about an error it could not raise (here:
# a fork hook of a library in the kernel, on the first run after a fresh install); the cell itself goes on.
_UNRAISABLE = re.compile(r"Exception ignored in:[^\n]*\n(?:[^\n]*\n)*?\s*\w+(?:Error|Exception):[^\n]*(?:\n|$)")


def _cell_failed(outputs: str) -> bool:
    """A traceback in the cells' outputs, other than an interpreter's "Exception ignored" report."""
    return "Traceback (most recent call last)" in _UNRAISABLE.sub("", outputs)


def _run_all_cells(page) -> None:
    """Run > Run All Cells from the menu bar (the command palette as a fallback)."""
    try:
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click(timeout=10_000)
        return
    except Exception:  # noqa: BLE001 - menu markup differs between JupyterLab versions: try the palette
        page.keyboard.press("Escape")
    page.keyboard.press("Control+Shift+c")
    page.keyboard.type("Run All Cells")
    page.keyboard.press("Enter")


def _widget_errors(messages: List[str]) -> List[str]:
    return [m for m in messages if any(word in m.lower() for word in WIDGET_WORDS)]


@pytest.mark.timeout(RUN_TIMEOUT_S + 300)
def test_quickstart_widgets_render_and_update_in_jupyterlab(tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(
            "no chromium on PATH (./scripts/test installs Debian's chromium as root; or set RLIGHTNING_CHROMIUM)"
        )
    sync_api = pytest.importorskip("playwright.sync_api")
    root = tmp_path / "notebooks"
    root.mkdir()
    target = root / NOTEBOOK.name
    shutil.copy(NOTEBOOK, target)
    shorten_notebook(target, SHORTEN)
    screenshot = tmp_path / "quickstart.png"

    console: List[str] = []
    console_errors: List[str] = []
    samples: List[Dict] = []

    def on_console(message) -> None:
        console.append(f"[{message.type}] {message.text}")
        if message.type == "error":
            console_errors.append(message.text)

    with jupyter_lab(root, tmp_path) as server, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.on("console", on_console)
            page.on("pageerror", lambda e: console_errors.append(f"page error: {e}"))
            page.goto(f"{server.url}/lab/tree/{target.name}?token={server.token}", timeout=180_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=180_000)
            _wait_kernel_idle(server)
            # Outputs stored in the notebook must not count: clear them before running.
            page.locator(".lm-MenuBar-itemLabel", has_text="Edit").first.click()
            page.locator(".lm-Menu-itemLabel", has_text="Clear Outputs of All Cells").first.click(timeout=10_000)
            page.wait_for_function(
                "(done) => !Array.from(document.querySelectorAll('.jp-OutputArea-output'))"
                ".some((e) => e.textContent.includes(done))",
                arg=DONE_TEXT,
                timeout=30_000,
            )

            _run_all_cells(page)
            deadline = time.time() + RUN_TIMEOUT_S
            state: Dict = {}
            while time.time() < deadline:
                state = page.evaluate(READ_WIDGETS)
                samples.append(state)
                if _cell_failed(state["outputs"]):
                    break
                if DONE_TEXT in state["outputs"]:
                    break
                time.sleep(0.5)
            page.locator(".rlightning-dashboard").first.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
            (tmp_path / "console.log").write_text("\n".join(console))

    outputs = state.get("outputs", "")
    assert not _cell_failed(outputs), f"a cell failed:\n{outputs[-4000:]}"
    assert DONE_TEXT in outputs, (
        f"the notebook did not finish within {RUN_TIMEOUT_S} s; last outputs:\n{outputs[-3000:]}\n"
        f"server log:\n{server.log_tail()}"
    )
    assert state["dashboards"] >= 1, "the EngineDashboard did not render (no .rlightning-dashboard in the page)"
    assert state["buffer_views"] >= 1, "the BufferView did not render (no .rlightning-buffer-view in the page)"
    assert state["episode_tables"] >= 1, "the EpisodeTable did not render (no .rlightning-episode-table in the page)"
    assert state["table_rows"] >= 2, f"the episode table shows {state['table_rows']} env rows, expected 2"

    iterations = [int(v) for s in samples for v in s["iteration"][:1] if v.isdigit()]
    sizes = [int(v) for s in samples for v in s["size"][:1] if v.isdigit()]
    written = [int(v) for s in samples for v in s["written"][:1] if v.isdigit()]
    distinct_iterations = sorted(set(iterations))
    assert len(distinct_iterations) >= 3, f"the dashboard's iteration counter did not move: saw {distinct_iterations}"
    assert iterations == sorted(iterations), f"the iteration counter went backwards: {iterations}"
    assert max(iterations) >= 30, f"the dashboard never showed the last iteration: saw up to {max(iterations)}"
    # The quickstart's rollout buffer is emptied by each training sample, so its size reads 0 whenever a
    # refresh falls between iterations; the lifetime count must climb with every rollout.
    assert sizes, "the BufferView showed no stored size"
    assert len(set(written)) >= 3, (
        f"the BufferView's written count did not move while training: saw {sorted(set(written))}"
    )
    assert written == sorted(written), f"the BufferView's written count went backwards: {written}"

    widget_errors = _widget_errors(console_errors)
    assert not widget_errors, "widget errors in the browser console:\n" + "\n".join(widget_errors)
    assert "Error displaying widget" not in outputs, "a widget failed to display"
    assert screenshot.exists() and screenshot.stat().st_size > 10_000, "no screenshot was saved"


PANEL_CELLS = [
    "from rlightning.notebook import Lab\n"
    "from rlightning.utils.config import load_preset\n"
    "lab = Lab.local(num_cpus=4, log_to_driver=False)\n"
    "cfg = load_preset('cartpole_ppo')\n"
    "cfg.cluster.remote_env = False\n"
    "cfg.train.iterations = 100_000\n"
    "cfg.train.target_return = None\n"
    "run = lab.build(cfg)",
    "run.show()",
]

RUN_N = 5000  # the Run N field's value in the panel test

READ_PANEL = """() => {
  const one = (sel) => { const e = document.querySelector(sel); return e ? e.textContent.trim() : null; };
  return {
    panels: document.querySelectorAll('.rlightning-panel').length,
    iteration: one('.rlightning-panel .rl-iteration'),
    state: one('.rlightning-panel .rl-state'),
    status: one('.rlightning-panel .rl-status'),
    chart: !!document.querySelector('.rlightning-panel img'),
    outputs: Array.from(document.querySelectorAll('.jp-OutputArea-output')).map((e) => e.textContent).join('\\n'),
  };
}"""


def _panel_notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in PANEL_CELLS]
    nbformat.write(nb, str(path))


def _wait_kernel_idle(server, timeout_s: float = 180) -> None:
    """Until the server lists a kernel and every kernel it lists is idle (one listing per look)."""
    deadline = time.time() + timeout_s
    while True:
        states = server.kernel_states()
        if states and all(s == "idle" for s in states):
            return
        assert time.time() < deadline, f"the kernel did not become idle: {server.log_tail()}"
        time.sleep(1)


def _wait_panel(page, predicate, what: str, timeout_s: float = 300) -> Dict:
    deadline = time.time() + timeout_s
    state: Dict = {}
    while time.time() < deadline:
        state = page.evaluate(READ_PANEL)
        assert not _cell_failed(state["outputs"]), state["outputs"][-3000:]
        if predicate(state):
            return state
        time.sleep(0.25)
    raise AssertionError(f"the panel never showed {what}; last state: {state}")


def _it(state: Dict) -> int:
    return int(state["iteration"]) if state["iteration"] and state["iteration"].isdigit() else -1


def _status_it(state: Dict) -> int:
    """The iteration the status line names ("paused at iteration 7"), -1 when it names none."""
    import re

    found = re.search(r"at iteration (\d+)", state["status"] or "")
    return int(found.group(1)) if found else -1


def _settled(state: Dict, wanted: str) -> bool:
    """The status says ``wanted`` and the header's counter shows the iteration it names (two widgets, two updates)."""
    return state["state"] == wanted and _status_it(state) >= 0 and _it(state) == _status_it(state)


@pytest.mark.timeout(1500)
def test_control_panel_buttons_drive_the_run_in_jupyterlab(tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(
            "no chromium on PATH (./scripts/test installs Debian's chromium as root; or set RLIGHTNING_CHROMIUM)"
        )
    sync_api = pytest.importorskip("playwright.sync_api")
    root = tmp_path / "notebooks"
    root.mkdir()
    target = root / "panel.ipynb"
    _panel_notebook(target)
    screenshot = tmp_path / "panel_mid_run.png"
    console_errors: List[str] = []
    with jupyter_lab(root, tmp_path) as server, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{server.url}/lab/tree/{target.name}?token={server.token}", timeout=180_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=180_000)
            _wait_kernel_idle(server)
            _run_all_cells(page)
            state = _wait_panel(page, lambda s: s["panels"] >= 1 and _it(s) == 0, "the panel at iteration 0")
            assert state["panels"] == 1, "run.show() as the last expression displays the panel once"

            page.locator(".rl-btn-step").first.click()
            state = _wait_panel(page, lambda s: _settled(s, "done") and _it(s) == 1, "one step done")
            assert "finished 1 iteration(s), at iteration 1" in state["status"]

            # N well past what the clicks below take (at about 70 ms an iteration, Run N's default 50 were over
            # before Pause and Resume had been clicked); Stop ends the run.
            n_field = page.locator(".rlightning-panel .rl-run-n input").first
            n_field.fill(str(RUN_N))
            n_field.press("Enter")
            page.locator(".rl-btn-run").first.click()
            state = _wait_panel(page, lambda s: s["state"] == "running" and _it(s) >= 4, "a run going")
            page.wait_for_timeout(2500)  # a chart redraw
            page.locator(".rlightning-panel").first.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshot), full_page=False)

            page.locator(".rl-btn-pause").first.click()
            state = _wait_panel(page, lambda s: _settled(s, "paused"), "paused")
            paused_at = _it(state)
            assert f"paused at iteration {paused_at}" in state["status"]
            page.wait_for_timeout(3000)
            assert _it(page.evaluate(READ_PANEL)) == paused_at, "a paused run does not go on"

            page.locator(".rl-btn-resume").first.click()
            state = _wait_panel(page, lambda s: s["state"] == "running" and _it(s) > paused_at, "resumed")

            page.locator(".rl-btn-stop").first.click()
            state = _wait_panel(page, lambda s: _settled(s, "stopped"), "stopped")
            stopped_at = _it(state)
            assert state["status"] == f"stopped at iteration {stopped_at}" and paused_at < stopped_at < 1 + RUN_N
            assert state["chart"], "the charts image is in the panel"

            page.locator(".rl-btn-play").first.click()
            page.wait_for_selector(".rlightning-panel video.rl-episode-video", timeout=300_000)
            page.wait_for_function(
                "() => { const v = document.querySelector('.rlightning-panel video.rl-episode-video');"
                " return v && v.readyState >= 1 && v.duration > 0; }",
                timeout=60_000,
            )
            duration = page.evaluate(
                "() => document.querySelector('.rlightning-panel video.rl-episode-video').duration"
            )
            assert duration > 0, "the episode video has no duration"
            page.locator(".rlightning-panel video.rl-episode-video").first.scroll_into_view_if_needed()
            page.screenshot(path=str(tmp_path / "episode_player.png"), full_page=False)
        finally:
            browser.close()
    widget_errors = _widget_errors(console_errors)
    assert not widget_errors, "widget errors in the browser console:\n" + "\n".join(widget_errors)
    assert screenshot.exists() and screenshot.stat().st_size > 10_000
