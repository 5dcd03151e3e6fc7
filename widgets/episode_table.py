"""`EpisodeTableWidget`: env -> storage shard -> train workers, updating as envs register."""

from __future__ import annotations

from typing import Any, Dict

from rlightning.widgets._base import LiveView, html_table


def episode_table_state(table: Any) -> Dict[str, Any]:
    """The view's state from an `EpisodeTable` (or a buffer holding one in ``episode_table``)."""
    table = getattr(table, "episode_table", table)
    if table is None:
        return {"rows": [], "num_storages": 0}
    env_to_storage = table.get_env_to_storage()
    storage_to_train = table.get_storage_to_train_workers()
    rows = [
        {"env_id": env, "storage": shard, "train_workers": list(storage_to_train.get(shard, []))}
        for env, shard in sorted(env_to_storage.items(), key=lambda kv: (kv[1], kv[0]))
    ]
    return {"rows": rows, "num_storages": len(storage_to_train), "storage_to_train": storage_to_train}


class EpisodeTableWidget(LiveView):
    """A live view of the env -> shard -> train worker routing of a buffer's `EpisodeTable`.

    Args:
        table: An EpisodeTable, or a DataBuffer (its ``episode_table`` is shown).
    """

    def __init__(self, table: Any) -> None:
        super().__init__()
        self.table = table
        self.refresh()

    def compute_state(self) -> Dict[str, Any]:
        return episode_table_state(self.table)

    def render_html(self, s: Dict[str, Any]) -> str:
        rows = [[r["env_id"], r["storage"], ", ".join(map(str, r["train_workers"]))] for r in s["rows"]]
        return (
            f"<div class='rlightning-episode-table'><b>Episode table</b> ({len(s['rows'])} envs, "
            f"{s['num_storages']} shards){html_table(['env', 'storage shard', 'train workers'], rows)}</div>"
        )
