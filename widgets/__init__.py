"""rlightning.widgets: ipywidgets views over the core's plain snapshots.

This folder sits at the repository top level and is installed as
``rlightning.widgets``. The views hold no logic the core lacks: their state
comes from ``buffer.stats()``, the buffer's ``EpisodeTable`` and the engine's
metrics and timing. Without ipywidgets they render as HTML with an install hint.
``ControlPanel`` (``run.show()``) drives a run through its public methods.
"""

from rlightning.widgets.buffer_view import BufferViewWidget, buffer_state
from rlightning.widgets.compare import CompareView
from rlightning.widgets.dashboard import EngineDashboard, engine_state
from rlightning.widgets.episode_table import EpisodeTableWidget, episode_table_state
from rlightning.widgets.explorer import BufferExplorer
from rlightning.widgets.league import LeagueSection  # registers the panel's league section
from rlightning.widgets.panel import ControlPanel, panel_state
from rlightning.widgets.player import EpisodePlayer

__all__ = [
    "BufferExplorer",
    "BufferViewWidget",
    "CompareView",
    "ControlPanel",
    "EngineDashboard",
    "EpisodePlayer",
    "EpisodeTableWidget",
    "LeagueSection",
    "panel_state",
    "buffer_state",
    "engine_state",
    "episode_table_state",
]
