"""`EpisodeTableWidget`: env -> storage shard -> train workers (with their nodes), as a table and a diagram."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from rlightning.widgets._base import LiveView, esc, fmt, html_table

_SECTIONS = {"env": ("env", "envs"), "storage": ("storage", "storages", "buffer"), "train": ("train", "train_workers")}


def _node(info: Any) -> Optional[str]:
    if isinstance(info, dict):
        for key in ("node_ip", "node_id", "node"):
            if info.get(key) is not None:
                return str(info[key])
        return None
    return None if info is None else str(info)


def _nodes(table: Any, kind: str) -> Dict[str, Optional[str]]:
    dist = getattr(table, "component_distribution", None) or {}
    for name in _SECTIONS[kind]:
        if name in dist:
            return {str(k): _node(v) for k, v in (dist[name] or {}).items()}
    return {}


def episode_table_state(table: Any, agent_returns: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """The view's state from an `EpisodeTable` (or a buffer holding one in ``episode_table``).

    ``agent_returns``: multi-agent runs, env id -> agent id -> that agent's mean recent return (a row's
    ``agent_returns``; the env group's ``stats()["env_agent_return_mean"]``).
    """
    table = getattr(table, "episode_table", table)
    if table is None:
        return {"rows": [], "num_storages": 0}
    agent_returns = agent_returns or {}
    env_to_storage = table.get_env_to_storage()
    storage_to_train = table.get_storage_to_train_workers()
    env_nodes, shard_nodes, train_nodes = _nodes(table, "env"), _nodes(table, "storage"), _nodes(table, "train")
    rows = [
        {
            "env_id": env,
            "storage": shard,
            "train_workers": list(storage_to_train.get(shard, [])),
            "env_node": env_nodes.get(env),
            "storage_node": shard_nodes.get(str(shard)),
            "train_nodes": [train_nodes.get(str(w)) for w in storage_to_train.get(shard, [])],
            "agent_returns": dict(agent_returns.get(env, {})),
        }
        for env, shard in sorted(env_to_storage.items(), key=lambda kv: (kv[1], kv[0]))
    ]
    return {"rows": rows, "num_storages": len(storage_to_train), "storage_to_train": storage_to_train}


def routing_svg(state: Dict[str, Any], row_h: int = 18, col_w: int = 190) -> str:
    """A small SVG: envs (left) -> storage shards (middle) -> train workers (right), one line per route."""
    envs = [r["env_id"] for r in state["rows"]]
    shards = sorted(state.get("storage_to_train", {}))
    workers = sorted({w for ws in state.get("storage_to_train", {}).values() for w in ws})
    if not envs:
        return ""
    height = row_h * max(len(envs), len(shards), len(workers), 1) + 8
    y = {}

    def place(kind: str, names: List[Any]) -> None:
        gap = (height - 8) / max(1, len(names))
        for i, n in enumerate(names):
            y[(kind, n)] = 4 + gap * (i + 0.5)

    place("env", envs)
    place("shard", shards)
    place("train", workers)
    xs = {"env": 4, "shard": col_w, "train": 2 * col_w - 40}
    lines = []
    for r in state["rows"]:
        lines.append((xs["env"] + 120, y[("env", r["env_id"])], xs["shard"] - 4, y[("shard", r["storage"])]))
    for shard, ws in state.get("storage_to_train", {}).items():
        for w in ws:
            lines.append((xs["shard"] + 60, y[("shard", shard)], xs["train"] - 4, y[("train", w)]))
    parts = [
        f"<line x1='{a:.0f}' y1='{b:.0f}' x2='{c:.0f}' y2='{d:.0f}' stroke='#999' stroke-width='1'/>"
        for a, b, c, d in lines
    ]
    for kind, names, label in (("env", envs, "{}"), ("shard", shards, "shard {}"), ("train", workers, "train {}")):
        for n in names:
            parts.append(
                f"<text x='{xs[kind]}' y='{y[(kind, n)] + 4:.0f}' font-size='11'>{esc(label.format(n))}</text>"
            )
    return f"<svg class='rl-routing' width='{2 * col_w + 20}' height='{height}'>{''.join(parts)}</svg>"


class EpisodeTableWidget(LiveView):
    """A live view of the env -> shard -> train worker routing of a buffer's `EpisodeTable`.

    Args:
        table: An EpisodeTable, or a DataBuffer (its ``episode_table`` is shown).
        env_stats: Returns the env group's ``stats()`` (multi-agent runs: per-agent returns per env).
    """

    def __init__(self, table: Any, env_stats: Optional[Callable[[], Dict[str, Any]]] = None) -> None:
        super().__init__()
        self.table = table
        self.env_stats = env_stats
        self.refresh()

    def compute_state(self) -> Dict[str, Any]:
        stats = self.env_stats() if self.env_stats is not None else {}
        return episode_table_state(self.table, stats.get("env_agent_return_mean"))

    def render_html(self, s: Dict[str, Any]) -> str:
        with_nodes = any(r.get("env_node") or r.get("storage_node") for r in s["rows"])
        headers = ["env", "storage shard", "train workers"]
        if with_nodes:
            headers = ["env", "env node", "storage shard", "shard node", "train workers", "train nodes"]
        agents = sorted({a for r in s["rows"] for a in r.get("agent_returns", {})})
        headers += [f"return {a}" for a in agents]
        rows = []
        for r in s["rows"]:
            workers = ", ".join(map(str, r["train_workers"]))
            if with_nodes:
                nodes = ", ".join(n or "-" for n in r["train_nodes"])
                row = [r["env_id"], r["env_node"] or "-", r["storage"], r["storage_node"] or "-", workers, nodes]
            else:
                row = [r["env_id"], r["storage"], workers]
            rows.append(row + [fmt(r.get("agent_returns", {}).get(a)) for a in agents])
        return (
            f"<div class='rlightning-episode-table'><b>Episode table</b> ({len(s['rows'])} envs, "
            f"{s['num_storages']} shards){html_table(headers, rows)}{routing_svg(s)}</div>"
        )
