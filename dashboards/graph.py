"""The topology as a Graphviz DOT graph (pure): clusters as nodes, flows and heartbeat hops as edges.

Flow edges are solid, coloured by the flow's status, labelled with records/s and lag; heartbeat
edges (one per direct hop a heartbeat was observed on) are dashed and labelled with the hop's
latest latency. Streamlit renders the DOT text in the browser (``st.graphviz_chart``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from dashboards import fmt
from dashboards.status import Level

__all__ = ["FlowEdge", "HeartbeatEdge", "topology_dot", "COLOURS"]

COLOURS: dict[Level, str] = {"green": "#2e7d32", "amber": "#ef8f00", "red": "#c62828"}


@dataclass(frozen=True)
class FlowEdge:
    source: str
    target: str
    level: Level
    records_per_s: float | None
    lag_records: int | None
    lag_ms: float | None


@dataclass(frozen=True)
class HeartbeatEdge:
    source: str
    target: str
    latency_ms: float | None


def _quote(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'


def topology_dot(clusters: Iterable[str], flows: Iterable[FlowEdge], heartbeats: Iterable[HeartbeatEdge]) -> str:
    lines = [
        "digraph mirrorlake {",
        '  rankdir=LR; bgcolor="transparent";',
        '  node [shape=box, style="rounded,filled", fillcolor="#eef3fb", color="#5b7db1", fontname="Helvetica"];',
        '  edge [fontname="Helvetica", fontsize=10];',
    ]
    lines += [f"  {_quote(c)};" for c in sorted(set(clusters))]
    for f in flows:
        lag = f"lag {fmt.count(f.lag_records, 'record')} / {fmt.duration_ms(f.lag_ms)}"
        label = f"{f.source}->{f.target}\\n{fmt.rate(f.records_per_s)}\\n{lag}"
        colour = COLOURS[f.level]
        lines.append(
            f"  {_quote(f.source)} -> {_quote(f.target)} [label={_quote(label)}, color={_quote(colour)}, "
            f"fontcolor={_quote(colour)}, penwidth=2.5];"
        )
    for h in heartbeats:
        label = f"heartbeat {fmt.duration_ms(h.latency_ms)}"
        lines.append(
            f"  {_quote(h.source)} -> {_quote(h.target)} [label={_quote(label)}, style=dashed, color=gray50, "
            "fontcolor=gray35, constraint=false];"
        )
    lines.append("}")
    return "\n".join(lines)
