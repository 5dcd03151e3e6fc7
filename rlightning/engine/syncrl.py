"""`syncrl`: rollout, then update, train and sync, one after another (PPO; SAC/DQN with a replay buffer)."""

from __future__ import annotations

from rlightning.engine.base_engine import BaseEngine
from rlightning.utils.registry import ENGINE


@ENGINE.register("syncrl")
class SyncRLEngine(BaseEngine):
    """Synchronous engine: each iteration collects a rollout, trains on the buffer, and syncs weights.

    With a rollout buffer (on-policy), episodes still running when a rollout
    ends are cut there (truncated, with the value of the next observation as
    bootstrap) and continue as a new segment in the next rollout; with a replay
    buffer, episodes are stored when they end and ``train.updates_per_iteration``
    sample-and-train rounds follow each rollout.
    """

    name = "syncrl"
