"""Storage internals of the data buffer: `Storage`, `EpisodeTable`, `BufferView`.

This package never imports Ray: a `Storage` is a plain class that the
`DataBuffer` runs in-process or launches as an actor.
"""

from rlightning.buffer.utils.buffer_view import BufferView
from rlightning.buffer.utils.episode_table import EpisodeTable
from rlightning.buffer.utils.storage import Storage, StorageFullError

__all__ = ["BufferView", "EpisodeTable", "Storage", "StorageFullError"]
