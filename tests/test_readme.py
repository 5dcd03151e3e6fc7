"""The README's notebook example runs as written."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.slow
@pytest.mark.ray
def test_readme_notebook_example_runs(tmp_path):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    code = blocks[0].replace('load_preset("cartpole_ppo")', 'load_preset("cartpole_ppo")\ncfg.log.run_dir = RUN_DIR')
    code = f"RUN_DIR = {str(tmp_path)!r}\nimport matplotlib\nmatplotlib.use('Agg')\n" + code
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
