"""`BufferViewWidget`: fill per shard, stored episodes and transitions, recent episodes, sample rows."""

from __future__ import annotations

import collections
import time
from typing import Any, Deque, Dict, List, Optional, Tuple

from rlightning.widgets._base import LiveView, esc, fmt, html_table, rows_of

#: Seconds of history the write rate is measured over (one burst of adds cannot make it jump).
RATE_WINDOW_S = 10.0


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
        self._written: Deque[Tuple[float, int]] = collections.deque()
        self.refresh()

    def compute_state(self) -> Dict[str, Any]:
        state = buffer_state(self.buffer, self.sample_rows)
        state["writes_per_sec"] = self._write_rate(state["transitions_written"])
        return state

    def _write_rate(self, written: int, now: Optional[float] = None) -> Optional[float]:
        """Transitions written per second over the last `RATE_WINDOW_S` seconds of refreshes (None: too early)."""
        now = time.monotonic() if now is None else now
        self._written.append((now, written))
        while len(self._written) > 2 and now - self._written[1][0] >= RATE_WINDOW_S:
            self._written.popleft()
        t0, w0 = self._written[0]
        span = now - t0
        return (written - w0) / span if span >= 1.0 else None

    def render_html(self, s: Dict[str, Any]) -> str:
        from rlightning.widgets.panel import num

        bars = "".join(
            f"<div class='rl-shard' data-shard='{sh['shard']}'>shard {sh['shard']}: "
            f"<progress value='{sh['size']}' max='{sh['capacity']}'></progress> "
            f"{num(sh['size'])}/{num(sh['capacity'])} ({sh['fill']:.0%})</div>"
            for sh in s["shards"]
        )
        # An on-policy buffer holds a rollout only until training samples it, so between iterations
        # "stored" reads 0; the lifetime count is the number that moves.
        cleared = " <i>(emptied by each training sample)</i>" if s["cleared_by_sample"] else ""
        recent = ""
        if s["recent_episodes"]:
            rows = [[e.get("env_id"), num(e.get("return")), num(e.get("length"))] for e in s["recent_episodes"]]
            recent = f"<div><i>recent episodes</i>{html_table(['env', 'return', 'length'], rows)}</div>"
        sample = ""
        if s["sample_rows"]:
            keys = ["reward", "done", "action"]
            sample = f"<div><i>sample rows</i>{html_table(keys, rows_of(s['sample_rows'], keys))}</div>"
        rate = s.get("writes_per_sec")
        rate_text = f", writes/s (last {RATE_WINDOW_S:.0f} s): {esc(num(rate))}" if rate is not None else ""
        episodes = (
            ""
            if s["episodes_stored"] is None
            else (f", episodes stored: <span class='rl-episodes'>{esc(fmt(s['episodes_stored']))}</span>")
        )
        return (
            "<div class='rlightning-buffer-view'><b>Data buffer</b> "
            f"<span class='rl-size'>{s['size']}</span> / {num(s['capacity'])} stored{episodes}, "
            f"written in all: <span class='rl-written'>{s['transitions_written']}</span>{rate_text}{cleared}"
            f"{bars}{recent}{sample}</div>"
        )
