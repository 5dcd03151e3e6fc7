"""Browser test of the live sweep widget (``exp.show()``, issue 37): JupyterLab + headless Chromium (Playwright).

A notebook starts a 2 learning rates x 2 seeds sweep and shows it; mid-sweep the test reads the widget
(trials table with running trials, a curves image with each config's band), saves a screenshot
(``sweep_mid_run.png`` in the test's temporary folder), then clicks Stop sweep and waits for the
view to say the sweep finished.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, List

import pytest

from tests.notebooks.test_browser import _cell_failed, _run_all_cells, _wait_kernel_idle, _widget_errors
from tests.support.browser import CHROMIUM_ARGS, find_chromium, jupyter_lab

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELLS = [
    "from rlightning.notebook import Lab\n"
    "from rlightning.utils.config import load_preset\n"
    "lab = Lab.local(num_cpus=4, log_to_driver=False)\n"
    "cfg = load_preset('cartpole_ppo')\n"
    "cfg.cluster.remote_env = False\n"
    "cfg.env.num_workers, cfg.env.num_envs, cfg.train.rollout_steps = 1, 4, 64\n"
    "cfg.log.progress = False",
    "exp = lab.sweep(cfg, {'policy.optim.lr': [3e-4, 3e-3]}, seeds=2, stop={'iterations': 400}, name='browser')\n"
    "exp.show()",
]

READ_VIEW = """() => {
  const outputs = Array.from(document.querySelectorAll('.jp-OutputArea-output')).map((e) => e.textContent);
  const view = document.querySelector('.rlightning-experiment');
  if (!view) return {views: 0, outputs: outputs.join('\\n')};
  const rows = Array.from(view.querySelectorAll('table tbody tr')).map((r) => r.textContent);
  const img = view.querySelector('img');
  return {
    views: document.querySelectorAll('.rlightning-experiment').length,
    status: (view.querySelector('b') || {parentElement: view}).parentElement.textContent,
    rows: rows,
    running: rows.filter((r) => r.includes('RUNNING')).length,
    curves: !!(img && img.naturalWidth > 0),
    outputs: outputs.join('\\n'),
  };
}"""


def _notebook(path: Path) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nbformat.write(nb, str(path))


def _wait(page, predicate, what: str, shot: Path, timeout_s: float = 300) -> Dict:
    deadline = time.time() + timeout_s
    state: Dict = {}
    while time.time() < deadline:
        state = page.evaluate(READ_VIEW)
        assert not _cell_failed(state["outputs"]), state["outputs"][-3000:]
        if predicate(state):
            return state
        time.sleep(0.5)
    page.screenshot(path=str(shot), full_page=True)  # what the page shows instead
    raise AssertionError(f"the sweep view never showed {what} (page: {shot}); last state: {state}")


@pytest.mark.timeout(900)
def test_sweep_view_is_live_mid_sweep_and_stops_it_in_jupyterlab(tmp_path):
    chromium = find_chromium()
    if chromium is None:
        pytest.skip(
            "no chromium on PATH (./scripts/test installs Debian's chromium as root; or set RLIGHTNING_CHROMIUM)"
        )
    sync_api = pytest.importorskip("playwright.sync_api")
    root = tmp_path / "notebooks"
    root.mkdir()
    target = root / "sweep.ipynb"
    _notebook(target)
    screenshot = tmp_path / "sweep_mid_run.png"
    console_errors: List[str] = []
    with jupyter_lab(root, tmp_path) as server, sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
            page.goto(f"{server.url}/lab/tree/{target.name}?token={server.token}", timeout=180_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=180_000)
            _wait_kernel_idle(server)
            _run_all_cells(page)
            # Mid-sweep: trials running, every config with two runs reported (its band drawn).
            state = _wait(
                page,
                lambda s: s.get("views") and s["running"] >= 2 and s["curves"] and "running" in s["status"],
                "running trials with curves",
                tmp_path / "sweep_not_running.png",
                timeout_s=600,  # the kernel starts Ray and the trials' processes import torch first
            )
            page.wait_for_timeout(5000)  # a few iterations more on the curves
            page.locator(".rlightning-experiment").first.scroll_into_view_if_needed()
            page.screenshot(path=str(screenshot), full_page=False)
            state = page.evaluate(READ_VIEW)
            assert state["views"] == 1, "exp.show() as the last expression displays the view once"
            assert len(state["rows"]) == 4, state["rows"]  # 2 learning rates x 2 seeds
            assert any("0.0003" in r for r in state["rows"]) and any("0.003" in r for r in state["rows"])

            page.locator(".rlightning-experiment button", has_text="Stop sweep").first.click()
            state = _wait(
                page, lambda s: "finished" in s["status"], "the sweep finished after Stop sweep", tmp_path / "stop.png"
            )
            assert state["running"] == 0 and len(state["rows"]) == 4
        finally:
            browser.close()
    widget_errors = _widget_errors(console_errors)
    assert not widget_errors, "widget errors in the browser console:\n" + "\n".join(widget_errors)
    assert screenshot.exists() and screenshot.stat().st_size > 10_000
