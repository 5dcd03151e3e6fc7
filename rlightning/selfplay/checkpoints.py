"""Checkpoint folders a frozen opponent is loaded from, checked where the env package can ask without importing the
policy package itself (an env worker's modules import no policy code; a frozen opponent's policy is loaded when
it plays)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["check_opponent_checkpoint"]


def check_opponent_checkpoint(path: Any) -> Path:
    """``path`` as a checkpoint folder a frozen opponent can be loaded from
    (`rlightning.policy.standalone.check_checkpoint_folder`), else its clear error."""
    from rlightning.policy.standalone import check_checkpoint_folder

    return check_checkpoint_folder(path)
