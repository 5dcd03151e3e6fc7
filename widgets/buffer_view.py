"""`BufferViewWidget`: fill per shard, stored episodes and transitions, recent episodes, sample rows."""

from __future__ import annotations

from typing import Any, Dict, List

from rlightning.widgets._base import LiveView, esc, fmt, html_table, rows_of


def buffer_state(buffer: Any, sample_rows: int = 5) -> Dict[str, Any]:
    """The view's state, taken from ``buffer.stats()`` (and a few stored rows when the buffer has any)."""
    stats = buffer.stats()
    shards = []
    for i, shard in enumerate(stats.get("shards", [])):
        cap = int(shard.get("capacity", 0)) or 1
        size = int(shard.get("size", 0))
        shards.append(
            {
                "shard": i,
                "size": size,
                "capacity": cap,
                "fill": size / cap,
                "episodes": shard.get("episodes"),
                "transitions": shard.get("transitions"),
            }
        )
    rows: List[Dict[str, Any]] = []
    if sample_rows and int(stats.get("size", 0)) > 0 and hasattr(buffer, "sample_rows"):
        try:
            td = buffer.sample_rows(sample_rows)
            for i in range(len(td)):
                row = {}
                for key in ("reward", "done", "action"):
                    if key in td.keys():
                        v = td[key][i]
                        row[key] = v.flatten()[:4].tolist() if v.numel() > 1 else v.item()
                rows.append(row)
        except Exception:  # noqa: BLE001 - display only
            rows = []
    return {
        "size": int(stats.get("size", 0)),
        "capacity": int(stats.get("capacity", 0)),
        "episodes_stored": stats.get("episodes_stored"),
        "transitions_written": int(stats.get("transitions_written", 0)),
        "cleared_by_sample": bool(stats.get("clear_after_sample", False)),
        "adds_per_sec": stats.get("adds_per_sec"),
        "shards": shards,
        "recent_episodes": list(stats.get("recent_episodes", []))[-10:],
        "sample_rows": rows,
    }


class BufferViewWidget(LiveView):
    """A live view of a `DataBuffer`: its state comes from ``buffer.stats()`` only.

    Args:
        buffer: The DataBuffer to show.
        sample_rows: How many stored rows to show (0: none).
    """

    def __init__(self, buffer: Any, sample_rows: int = 5) -> None:
        super().__init__()
        self.buffer = buffer
        self.sample_rows = sample_rows
        self.refresh()

    def compute_state(self) -> Dict[str, Any]:
        return buffer_state(self.buffer, self.sample_rows)

    def render_html(self, s: Dict[str, Any]) -> str:
        bars = "".join(
            f"<div class='rl-shard' data-shard='{sh['shard']}'>shard {sh['shard']}: "
            f"<progress value='{sh['size']}' max='{sh['capacity']}'></progress> "
            f"{sh['size']}/{sh['capacity']} ({sh['fill']:.0%})</div>"
            for sh in s["shards"]
        )
        # An on-policy buffer holds a rollout only until training samples it, so between iterations
        # "stored" reads 0; the lifetime count is the number that moves.
        cleared = " <i>(emptied by each training sample)</i>" if s["cleared_by_sample"] else ""
        recent = html_table(["env", "return", "length"], rows_of(s["recent_episodes"], ["env_id", "return", "length"]))
        sample = html_table(["reward", "done", "action"], rows_of(s["sample_rows"], ["reward", "done", "action"]))
        return (
            "<div class='rlightning-buffer-view'><b>Data buffer</b> "
            f"<span class='rl-size'>{s['size']}</span> / {s['capacity']} stored, "
            f"episodes stored: <span class='rl-episodes'>{esc(fmt(s['episodes_stored']))}</span>, "
            f"written in all: <span class='rl-written'>{s['transitions_written']}</span>, "
            f"adds/s: {esc(fmt(s['adds_per_sec']))}{cleared}"
            f"{bars}<div><i>recent episodes</i>{recent}</div><div><i>sample rows</i>{sample}</div></div>"
        )
