"""The shared offline datasets (tests/support/offline_data.py) as fixtures here."""

from tests.support.offline_data import cartpole_expert_dataset, pendulum_random_dataset  # noqa: F401
