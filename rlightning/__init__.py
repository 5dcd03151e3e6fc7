"""rlightning: a Jupyter-first toolkit for distributed reinforcement learning on Ray."""

__version__ = "0.1.0"
