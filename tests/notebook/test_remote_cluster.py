"""A real separate cluster: `ray start --head` on 127.0.0.1, a Lab joins it, trains, and leaves nothing behind."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cluster import ray_head, token_file


def _driver(*args: str, secret: str = "") -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "tests.support.remote_driver", *args], capture_output=True, text=True, timeout=420
    )
    assert out.returncode == 0, out.stderr[-3000:]
    if secret:  # logs at DEBUG, reprs, HTML summaries: none shows the token
        assert secret not in out.stdout + out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.ray
@pytest.mark.slow
def test_lab_on_a_separate_cluster_trains_and_cleans_up():
    with ray_head(num_cpus=4) as address:
        token = Path(token_file()).read_text().strip()
        assert len(token) >= 16
        result = _driver("train", address, token_file(), secret=token)
        assert result["iterations"] == 2
        assert result["cpus"] == 4
        assert result["replaced"] is True
        assert _driver("actors", address, token_file())["alive"] == []


@pytest.mark.ray
@pytest.mark.slow
def test_token_cluster_without_token_says_what_to_do():
    code = (
        "import os; os.environ.pop('RAY_AUTH_MODE', None); os.environ.pop('RAY_AUTH_TOKEN', None);"
        "os.environ['RAY_AUTH_TOKEN_PATH'] = '/nonexistent';"
        "from rlightning.notebook import Lab\n"
        "try:\n    Lab.connect(ADDRESS, timeout_s=5)\nexcept Exception as e:\n    print(type(e).__name__, e)\n"
    )
    with ray_head(num_cpus=1) as address:
        out = subprocess.run(
            [sys.executable, "-c", code.replace("ADDRESS", repr(address))], capture_output=True, text=True, timeout=300
        )
    assert "ClusterConnectionError" in out.stdout, out.stdout + out.stderr[-2000:]
    assert "token" in out.stdout
