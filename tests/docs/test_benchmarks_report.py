"""benchmarks/report.py: results files written and checked, and README.md / HISTORY.md made from them.

The README's current figures and the history's tables are whatever the results files give: the first two
tests regenerate both and compare, so neither can go stale without failing here.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import report  # noqa: E402


def test_readme_current_figures_are_the_newest_results_files() -> None:
    results = report.load_all()
    text = report.README.read_text()
    assert report.render_readme(text, results) == text, "stale: run `python benchmarks/report.py`"
    newest = report.newest(results)
    assert {"run", "learning", "device_env", "load", "sweep_overhead"} <= set(newest)
    for name, r in newest.items():  # each benchmark's section names its newest file, its date and command
        section = text.split(f"\n### {name}\n", 1)[1].split("\n### ", 1)[0]
        assert f"`benchmarks/{r.link}`" in section and r.date in section and r.command[0] in section
    assert text.rstrip().split(report.END, 1)[1].count("\n## Notes (dated)") == 1


def test_history_tables_are_rendered_from_results_files() -> None:
    results = report.load_all()
    text = report.HISTORY.read_text()
    assert report.render_history(text, results) == text, "stale: run `python benchmarks/report.py`"
    named = set(re.findall(r"<!-- results: results/(\S+\.json)", text))
    migrated = {r.path.name for r in results if r.source}
    assert migrated <= named, f"results files migrated from the notes but shown nowhere: {migrated - named}"


def test_save_stores_printed_tables_as_rows_and_newest_wins(tmp_path: Path) -> None:
    printed = "Sampling, env steps/s\n| case | ours | `a|b` |\n|---|---:|---|\n| 1x8 | 10.9k | x |\n\nafter"
    first = report.save("sampling", "Sampling", printed, data={"v": [1]}, folder=tmp_path, when=1_800_000_000)
    second = report.save("sampling", "Sampling", printed, command="benchmarks/run", folder=tmp_path, when=1_800_000_000)
    assert first.name.endswith("-sampling.json") and second.name.endswith("-sampling-2.json")
    raw = json.loads(first.read_text())
    assert raw["body"][1] == {"columns": ["case", "ours", "`a|b`"], "rows": [["1x8", "10.9k", "x"]]}
    assert raw["data"] == {"v": [1]} and raw["command"][0].startswith("python ") and raw["machine"]
    results = report.load_all(tmp_path)
    assert report.newest(results)["sampling"].path == second and report.newest(results)["sampling"].command == [
        "benchmarks/run"
    ]
    table = "| case | ours | `a|b` |\n|---|---|---|\n| 1x8 | 10.9k | x |"
    assert report.render_blocks(results[0].body) == f"Sampling, env steps/s\n\n{table}\n\nafter"


def test_bad_input_is_refused_with_what_was_wrong(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="lower case"):
        report.save("Device Env", "t", "| a |\n|---|\n| 1 |", folder=tmp_path)
    with pytest.raises(ValueError, match="no markdown table"):
        report.save("device_env", "t", "just text", folder=tmp_path)
    bad = tmp_path / "2026-12-04-x.json"
    bad.write_text(json.dumps({"schema": 1, "benchmark": "x", "title": "t", "date": "4 Dec"}))
    with pytest.raises(report.ResultsFileError, match=r"2026-12-04-x\.json: 'date' must be"):
        report.load_all(tmp_path)
    with pytest.raises(ValueError, match="marker lines"):
        report.render_readme("# Benchmarks\n", [])
    with pytest.raises(report.ResultsFileError, match="not in benchmarks/results"):
        report.render_history("<!-- results: results/2020-01-01-none.json -->\n", [])
