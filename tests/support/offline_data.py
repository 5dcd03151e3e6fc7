"""Datasets the offline tests share, collected locally (Minari's remote datasets are out of reach here).

Imported as fixtures by tests/datasets/conftest.py and the offline engine's and algorithms' tests.
"""

from __future__ import annotations

import pytest

from rlightning import datasets
from rlightning.datasets.collect import collect_episodes


def cartpole_expert(obs):
    """A scripted CartPole controller (push towards where the pole falls): 500, the maximum, from every start."""
    x, x_dot, theta, theta_dot = obs
    return int(theta + 0.3 * theta_dot + 0.01 * x + 0.1 * x_dot > 0)


@pytest.fixture(scope="session")
def cartpole_expert_dataset(tmp_path_factory):
    """20 expert CartPole episodes (10,000 transitions) as a Minari dataset; references: random and 500."""
    path = tmp_path_factory.mktemp("datasets") / "cartpole_expert"
    episodes = collect_episodes(cartpole_expert, "CartPole-v1", 20, seed=0)
    datasets.write(episodes, path, env="CartPole-v1", ref_max_score=500.0, ref_episodes=5)
    return path


@pytest.fixture(scope="session")
def pendulum_random_dataset(tmp_path_factory):
    """4 random Pendulum episodes (800 transitions)."""
    path = tmp_path_factory.mktemp("datasets") / "pendulum_random"
    datasets.write(collect_episodes(None, "Pendulum-v1", 4, seed=1), path, env="Pendulum-v1", ref_episodes=0)
    return path
