"""rlightning: a Jupyter-first toolkit for distributed reinforcement learning on Ray."""

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "load_policy"]


def __getattr__(name: str) -> Any:
    # `load_policy` imports torch and the policy package on first use, not with `import rlightning`.
    if name == "load_policy":
        from rlightning.policy.standalone import load_policy

        return load_policy
    raise AttributeError(f"module 'rlightning' has no attribute {name!r}")
