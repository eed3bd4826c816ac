"""What ships with the exporter fits it: the Grafana dashboard asks only for metrics the exporter serves, the
documented metric table (docs/monitoring.md) is the catalog, and the systemd unit runs a command the CLI takes."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from gpuhook.metrics.catalog import FAMILIES

REPO = Path(__file__).parents[3]
DASHBOARD = REPO / "packaging/grafana/gpuhook.json"
NAMES = {f.name for f in FAMILIES}


def _exprs(node: object) -> list[str]:
    """Every PromQL text in the dashboard: targets' expr, template variables' queries."""
    if isinstance(node, dict):
        found = [v for k, v in node.items() if k in ("expr", "definition") and isinstance(v, str)]
        if isinstance(node.get("query"), str) and node.get("type") == "query":
            found.append(node["query"])
        return found + [e for v in node.values() for e in _exprs(v)]
    if isinstance(node, list):
        return [e for v in node for e in _exprs(v)]
    return []


def test_the_dashboard_asks_only_for_served_metrics_and_shows_the_issues_panels() -> None:
    dash = json.loads(DASHBOARD.read_text())
    exprs = _exprs(dash)
    used = {m for e in exprs for m in re.findall(r"\bgpuhook_[a-z_]+", e)}
    assert used and used <= NAMES, sorted(used - NAMES)
    titles = {p["title"] for p in dash["panels"]}
    assert {"GPU utilisation by pod", "GPU memory used by pod", "Tuning in force", "Exclusive leases",
            "Containers refused, by reason"} <= titles
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))
    assert {v["name"] for v in dash["templating"]["list"]} == {"datasource", "instance", "vendor", "namespace"}
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]


def test_the_documented_metric_table_is_the_catalog() -> None:
    page = (REPO / "docs/monitoring.md").read_text()
    section = page.split("## Metrics", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(gpuhook_[a-z_]+)` \| (\w+) \| ([^|]*) \|", section, re.M)
    assert [r[0] for r in rows] == [f.name for f in FAMILIES]
    for (name, kind, labels), fam in zip(rows, FAMILIES, strict=True):
        assert kind == fam.kind, name
        assert re.findall(r"`(\w+)`", labels) == list(fam.labels), name


def test_the_systemd_unit_runs_the_exporter() -> None:
    from gpuhook.cli.admin import _parser

    unit = (REPO / "packaging/systemd/gpuhook-exporter.service").read_text()
    starts = [ln.split("=", 1)[1] for ln in unit.splitlines() if ln.startswith("ExecStart=")]
    argv = shlex.split(starts[0])
    assert argv[0] == "/usr/local/bin/gpuhook"
    assert _parser().parse_args(argv[1:]).func.__name__ == "_exporter"
    assert "Environment=GPUHOOK_CONFIG=/etc/gpuhook/config.toml" in unit.splitlines()
    assert "ProtectSystem=strict" in unit and "WantedBy=multi-user.target" in unit
