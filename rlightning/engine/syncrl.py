"""`syncrl`: on-policy iterations (PPO): rollout, then update, train and sync, one after another."""

from __future__ import annotations

from rlightning.engine.base_engine import BaseEngine
from rlightning.utils.registry import ENGINE


@ENGINE.register("syncrl")
class SyncRLEngine(BaseEngine):
    """Synchronous engine: each iteration collects a fresh rollout, trains on it, and syncs weights.

    Episodes still running when a rollout ends are cut there (truncated, with
    the value of the next observation as bootstrap) and continue as a new
    segment in the next rollout.
    """

    name = "syncrl"
    on_policy = True
