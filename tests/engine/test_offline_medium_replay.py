"""IQL and CQL end above the mean return of a locally collected Pendulum "medium-replay" dataset, over 3 seeds.

The recipe (the dataset, the CI-size budgets and why they are what they are) is
``benchmarks/offline_learning_check.py``, which also prints the table and saves a results file.
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.offline_learning_check import POLICIES, SEEDS, medium_replay, offline_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    return medium_replay(tmp_path_factory.mktemp("medium_replay"))


@pytest.mark.parametrize("algo", sorted(POLICIES))
def test_offline_rl_ends_above_the_medium_replay_datasets_mean(dataset, algo, tmp_path):
    finals = [offline_run(dataset.path, algo, seed, tmp_path)["final"] for seed in SEEDS]
    assert min(finals) > dataset.return_mean, f"{algo}: final returns {np.round(finals, 1)}, data {dataset.return_mean}"
