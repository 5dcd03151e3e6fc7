"""The panel's league section (self-play runs, `rlightning.selfplay`): the Elo table and the win-rate matrix.

Shown when the run's engine has a league (``env_kwargs.opponent: league``). The Elo table lists the snapshots
(newest first) with their rating, the iteration they were taken at and whether they are in the pool, with
random play as the anchor; the matrix is a heatmap of each snapshot's points per game against each other
(rows against columns: red below 0.5, green above, blank where they have not played).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from rlightning.widgets._base import esc, html_table
from rlightning.widgets.sections import _HTMLSection, num, register_section

__all__ = ["LeagueSection", "league_view", "win_rate_color"]


def win_rate_color(rate: float) -> str:
    """The heatmap's background of a points-per-game ``rate`` in [0, 1]: red (0) through white (0.5) to green."""
    rate = min(max(float(rate), 0.0), 1.0)
    if rate < 0.5:
        t = rate / 0.5
        return f"rgb(230,{int(120 + 135 * t)},{int(120 + 135 * t)})"
    t = (rate - 0.5) / 0.5
    return f"rgb({int(255 - 135 * t)},{int(255 - 25 * t)},{int(255 - 135 * t)})"


def league_view(league: Any) -> Dict[str, Any]:
    """The section's state: ``elo`` rows (name, rating, iteration, in pool) and the ``matrix`` of the newest
    snapshots (at most 12) as ``names`` x ``names`` rates (None where they have not played)."""
    pool = set(league.pool)
    ratings = league.ratings()
    elo = [[s["name"], ratings[s["name"]], s["iteration"], s["name"] in pool] for s in reversed(league.snapshots)]
    elo.append(["random", ratings["random"], None, False])
    names = [s["name"] for s in league.snapshots[-12:]]
    matrix: List[List[Any]] = []
    for a in names:
        row = []
        for b in names:
            rate = league.win_rate(a, b)
            row.append(None if rate != rate else rate)
        matrix.append(row)
    return {"elo": elo, "names": names, "matrix": matrix}


def _matrix_html(names: List[str], matrix: List[List[Any]]) -> str:
    if not names:
        return ""
    head = "".join(f"<th>{esc(n.replace('iter_', ''))}</th>" for n in names)
    rows = []
    for name, row in zip(names, matrix):
        cells = "".join(
            "<td></td>" if r is None else f"<td style='background:{win_rate_color(r)};text-align:center'>{r:.2f}</td>"
            for r in row
        )
        rows.append(f"<tr><th>{esc(name.replace('iter_', ''))}</th>{cells}</tr>")
    return (
        "<div class='rl-league-matrix'><b>points per game, row against column</b>"
        f"<table><tr><th></th>{head}</tr>{''.join(rows)}</table></div>"
    )


@register_section("league")
class LeagueSection(_HTMLSection):
    """Elo ratings of the league's snapshots and their win-rate matrix (self-play runs only)."""

    view: Optional[Dict[str, Any]] = None

    def refresh(self) -> bool:
        league = getattr(self.run.engine, "league", None)
        self.view = league_view(league) if league is not None and league.snapshots else None
        return self.view is not None

    def render_html(self) -> str:
        if self.view is None:  # not a self-play run (or no snapshot yet): nothing to show
            return ""
        rows = [
            [esc(n), num(float(r)), "-" if i is None else num(i), "yes" if p else ""] for n, r, i, p in self.view["elo"]
        ]
        table = html_table(["player", "Elo", "iteration", "in pool"], rows)
        return f"<div class='rl-league'>{table}{_matrix_html(self.view['names'], self.view['matrix'])}</div>"
