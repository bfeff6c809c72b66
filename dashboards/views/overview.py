"""Overview: every cluster and flow as a graph, each flow's status with its reason, heartbeat paths."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import data_health as dh
from dashboards import fmt
from dashboards.graph import FlowEdge, HeartbeatEdge, topology_dot
from dashboards.status import flow_status
from dashboards.view import View

__all__ = ["render", "LEVEL_BADGE"]

LEVEL_BADGE = {
    "green": ":green-badge[:material/check_circle: green]",
    "amber": ":orange-badge[:material/warning: amber]",
    "red": ":red-badge[:material/error: red]",
}


def render(view: View) -> None:
    flows = view.get(dh.flows, tuple(view.configured_flows))
    if not flows:
        st.info("No flow seen yet: run `mirrorlake replicate`, then `mirrorlake lakehouse build` (or `make demo`).")
        return
    edges = []
    st.subheader("Flows")
    for flow in flows:
        health = view.get(dh.flow_health, flow)
        status = flow_status(health, view.now_ms)
        rates = view.get(dh.flow_rates, flow)
        source, target = flow.split("->", 1)
        lag_ms = None if health.seconds_at_risk is None else health.seconds_at_risk * 1000
        edges.append(FlowEdge(source, target, status.level, rates.replicated_per_s, health.records_at_risk, lag_ms))
        with st.container(border=True, key=f"flow-{source}-{target}"):
            st.markdown(f"**{fmt.text(flow)}** · {LEVEL_BADGE[status.level]} · {fmt.text(status.reason)}")
            cols = st.columns(5)
            cols[0].metric(
                "Records/s", fmt.per_second(rates.replicated_per_s), help="copied, between the last two watermarks"
            )
            cols[1].metric("Lag (records)", fmt.count(health.records_at_risk), help="records not replicated yet")
            cols[2].metric("Lag (time)", fmt.duration_ms(lag_ms), help="age of the oldest record not replicated yet")
            cols[3].metric(
                "Last heartbeat", fmt.ago(health.last_heartbeat_ms, view.now_ms), help=fmt.utc(health.last_heartbeat_ms)
            )
            cols[4].metric(
                "Last offset sync", fmt.ago(health.last_sync_ms, view.now_ms), help=fmt.utc(health.last_sync_ms)
            )
    topo = view.get(dh.topology)
    heartbeats = (
        []
        if topo.empty
        else [
            HeartbeatEdge(r.origin_cluster, r.cluster, r.latest_latency_ms)
            for r in topo[topo["hops"] == 1].itertuples()
        ]
    )
    clusters = set(view.config.clusters) | {c for e in edges for c in (e.source, e.target)}
    if not topo.empty:
        clusters |= set(topo["origin_cluster"]) | set(topo["cluster"])
    st.subheader("Topology")
    st.caption("Solid: flows, coloured by status, with records/s and lag. Dashed: heartbeat hops with their latency.")
    st.graphviz_chart(topology_dot(clusters, edges, heartbeats))
    st.subheader("Heartbeat paths")
    if topo.empty:
        st.info(
            "No heartbeat observed yet: `mirrorlake replicate` sends one per flow every second; "
            "then `mirrorlake lakehouse build`."
        )
        return
    st.caption("Latency of the latest heartbeat from its origin, end to end and on its last hop.")
    st.dataframe(
        pd.DataFrame(
            {
                "path": topo["path"],
                "hops": topo["hops"],
                "latency": [fmt.duration_ms(v) for v in topo["latest_latency_ms"]],
                "last hop": [fmt.duration_ms(None if pd.isna(v) else v) for v in topo["latest_hop_latency_ms"]],
                "last seen": [fmt.when(int(v), view.now_ms) for v in topo["last_seen_ms"]],
                "observations": topo["observations"],
            }
        ),
        hide_index=True,
        width="stretch",
    )
