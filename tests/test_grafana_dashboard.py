"""The Grafana dashboard shipped for the replicator's /metrics queries only metrics the replicator exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest

from replicator.flow.observability import FlowCollector
from replicator.flow.runner import FlowStats

BOARD = Path(__file__).parent.parent / "dashboards" / "grafana" / "mirrorlake-replicator.json"


def _exported() -> set[str]:
    stats = FlowStats(records=10, bytes=1000, syncs=2, lag={("orders", 0): 5}, last_record_age_s=0.5)
    stats.latency.observe(0.02)
    registry = CollectorRegistry()
    registry.register(FlowCollector(lambda: [("A->B", stats)]))
    text = generate_latest(registry).decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def _queried(board: dict) -> set[str]:
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    exprs += [v["query"] for v in board["templating"]["list"] if v["type"] == "query"]
    return {name for e in exprs for name in re.findall(r"\b(mirrorlake_[a-z_]+)", e)}


def test_every_metric_the_board_queries_is_exported():
    board = json.loads(BOARD.read_text())
    queried = _queried(board)
    assert queried, "the board queries no mirrorlake metric"
    missing = queried - _exported()
    assert not missing, f"the Grafana board queries metrics /metrics does not export: {sorted(missing)}"


def test_every_exported_metric_has_a_panel():
    families = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in _exported()}
    shown = {re.sub(r"_(total|bucket|sum|count)$", "", n) for n in _queried(json.loads(BOARD.read_text()))}
    assert families <= shown, f"exported but on no panel: {sorted(families - shown)}"
