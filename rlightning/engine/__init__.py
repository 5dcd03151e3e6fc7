"""Engines: `BaseEngine` and the registered ones (``syncrl``, ``asyncrl``, ``eval``, ``offline``)."""

from rlightning.engine.asyncrl import AsyncRLEngine
from rlightning.engine.base_engine import BaseEngine
from rlightning.engine.eval_engine import EvalEngine
from rlightning.engine.offline import OfflineEngine
from rlightning.engine.syncrl import SyncRLEngine
from rlightning.engine.timing import Timing

__all__ = ["AsyncRLEngine", "BaseEngine", "EvalEngine", "OfflineEngine", "SyncRLEngine", "Timing"]
