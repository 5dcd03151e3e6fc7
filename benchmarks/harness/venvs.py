"""Peer virtual environments under ``.bench/venvs/``, created on first use.

Each peer gets its own venv because its pins conflict with ours (TorchRL 0.14
wants tensordict < 0.15). torch is installed first, on its own, with the same
version as ours: pip then takes the CPU wheel that is already on disk instead
of resolving a multi-GB CUDA build for the peer's torch requirement.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".bench" / "venvs"
TORCH = "torch==2.13.0"

# name -> (pip requirements after torch, distributions whose versions are reported).
# gymnasium is left to each peer's own pin (RLlib 2.60 pins one older than ours); its version is reported.
PEERS: Dict[str, tuple] = {
    "rllib": (["ray[rllib]==2.60.0"], ["ray", "torch", "gymnasium", "numpy"]),
    "torchrl": (["torchrl==0.14.*", "tensordict<0.15", "gymnasium"], ["torchrl", "tensordict", "torch", "gymnasium"]),
    "sb3": (["stable-baselines3==2.9.*", "gymnasium[box2d]"], ["stable_baselines3", "torch", "gymnasium", "numpy"]),
    # rl-baselines3-zoo: its Optuna hyperparameter optimisation of SB3 (the sweep anchor, benchmarks/sweep_anchor.py;
    # the zoo writes its study with Optuna's trials_dataframe, which needs pandas).
    "zoo": (
        ["rl_zoo3==2.9.*", "stable-baselines3==2.9.*", "pandas==3.*"],
        ["rl_zoo3", "stable_baselines3", "optuna", "torch"],
    ),
    # d3rlpy: the offline algorithms' peer (benchmarks/offline.py; Minari's arrow reader needs Pillow).
    "d3rlpy": (["d3rlpy==2.8.1", "minari[arrow]==0.5.4", "pillow==13.0.0"], ["d3rlpy", "minari", "torch", "gymnasium"]),
    # sb3-contrib's MaskablePPO on PettingZoo's classic games (benchmarks/games_maskppo.py, PettingZoo's SB3 tutorial).
    "games": (
        ["sb3-contrib==2.9.*", "stable-baselines3==2.9.*", "pettingzoo[classic]==1.27.0"],
        ["sb3_contrib", "stable_baselines3", "pettingzoo", "torch"],
    ),
}


def python_of(name: str) -> Path:
    """The interpreter of a peer venv (``ours`` is the project's .venv)."""
    if name == "ours":
        return ROOT / ".venv" / "bin" / "python"
    return VENVS / name / "bin" / "python"


def _stamp(name: str) -> Path:
    return VENVS / name / ".harness-stamp"


def _wanted(name: str) -> str:
    return json.dumps([TORCH] + PEERS[name][0])


def ensure(name: str, log=print) -> Path:
    """Create (or finish) the venv of peer ``name``; returns its python."""
    if name not in PEERS:
        raise KeyError(f"unknown peer {name!r}; known: {sorted(PEERS)}")
    py = python_of(name)
    stamp = _stamp(name)
    if stamp.exists() and stamp.read_text() == _wanted(name) and py.exists():
        return py
    log(f"[bench] creating the {name} venv in {py.parents[1].relative_to(ROOT)} (first use, a few minutes)")
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(py.parents[1])], check=True)
    pip = [str(py), "-m", "pip", "install", "-q"]
    subprocess.run(pip + ["--upgrade", "pip"], check=True)
    subprocess.run(pip + [TORCH], check=True)  # first, alone: the local CPU wheel
    subprocess.run(pip + [TORCH] + PEERS[name][0], check=True)
    stamp.write_text(_wanted(name))
    return py


def versions(name: str) -> Dict[str, str]:
    """Installed versions of the distributions reported for ``name`` (``ours``: rlightning's venv)."""
    dists: List[str] = ["rlightning", "ray", "torch", "gymnasium", "tensordict"] if name == "ours" else PEERS[name][1]
    code = (
        "import json, sys\nfrom importlib.metadata import version, PackageNotFoundError\nout = {}\n"
        "for d in sys.argv[1:]:\n    try: out[d] = version(d)\n    except PackageNotFoundError: out[d] = None\n"
        "out['python'] = sys.version.split()[0]\nprint(json.dumps(out))"
    )
    res = subprocess.run([str(python_of(name)), "-c", code, *dists], capture_output=True, text=True, check=True)
    return json.loads(res.stdout)


if __name__ == "__main__":
    for peer in sys.argv[1:] or sorted(PEERS):
        ensure(peer)
        print(peer, versions(peer))
