"""Failover (read-only): what failing a flow's groups over now would cost, from the lakehouse alone.

Today's figures are gold ``rpo_now`` (records at risk per partition) and ``failover_now`` (per
group and partition: lost, re-read, duplicated at the checkpoint's resume offset). The plan for a
chosen time and the consistent cut come from ``mirrorlake failover plan`` (``replicator.failover``,
being built): ``plan_section`` is where its figures go. Applying a failover stays a CLI action.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import data, fmt
from dashboards.view import View
from dashboards.views.common import flow_picker

__all__ = ["render", "plan_section"]


def _sum(values: pd.Series) -> float | None:
    total = values.sum(min_count=1)
    return None if pd.isna(total) else float(total)


def render(view: View) -> None:
    flow = flow_picker(view)
    if flow is None:
        return
    rpo = view.get(data.rpo_now, flow)
    costs = view.get(data.failover_now, flow)
    if rpo.empty and costs.empty:
        st.info(
            "Nothing to plan from yet: `mirrorlake replicate` publishes watermarks and group checkpoints; "
            "then `mirrorlake lakehouse build`."
        )
        return
    st.caption("If the source cluster were lost now and every consumer group moved to the target.")
    groups = sorted(costs["group"].unique()) if not costs.empty else []
    chosen = st.multiselect("Groups", groups, default=groups, key="failover_groups") if groups else []
    picked = costs[costs["group"].isin(chosen)] if not costs.empty else costs
    at_risk = None if rpo.empty else _sum(rpo["records_unreplicated"])
    oldest = None if rpo.empty else rpo["seconds_unreplicated"].max()
    cols = st.columns(5)
    cols[0].metric("Records at risk (RPO)", fmt.count(at_risk), help="source records not replicated yet")
    cols[1].metric("Oldest at risk", fmt.duration_ms(None if oldest is None or pd.isna(oldest) else oldest * 1000))
    lost = None if picked.empty else _sum(picked["records_lost_total"])
    cols[2].metric("Lost by the groups", fmt.count(lost), help="not replicated yet + skipped by the resume offset")
    cols[3].metric("Re-read", fmt.count(None if picked.empty else _sum(picked["records_reread"])))
    cols[4].metric("Duplicated", fmt.count(None if picked.empty else _sum(picked["records_duplicated"])))
    if not at_risk and not lost:
        st.success("Safe to fail over now: nothing at risk, no group would lose records.")
    else:
        st.warning(f"A failover now loses data: {fmt.count(at_risk or 0, 'record')} not replicated yet.")
    if not picked.empty:
        st.subheader("Per group and partition")
        st.dataframe(
            pd.DataFrame(
                {
                    "group": picked["group"],
                    "partition": picked["source_topic"] + "[" + picked["partition"].astype(str) + "]",
                    "committed": picked["committed_offset"],
                    "resume at": picked["resume_offset"],
                    "exact": picked["exact_offset"],
                    "method": picked["method"],
                    "lost": picked["records_lost_total"],
                    "re-read": picked["records_reread"],
                    "duplicated": picked["records_duplicated"],
                    "as of": [fmt.when(None if pd.isna(v) else int(v), view.now_ms) for v in picked["as_of_ms"]],
                }
            ),
            hide_index=True,
            width="stretch",
        )
    if not rpo.empty:
        st.subheader("Records at risk per partition")
        st.dataframe(
            pd.DataFrame(
                {
                    "partition": rpo["source_topic"] + "[" + rpo["partition"].astype(str) + "]",
                    "not replicated": rpo["records_unreplicated"],
                    "lost to retention": rpo["records_expired_unreplicated"],
                    "oldest at risk": [
                        fmt.duration_ms(None if pd.isna(v) else v * 1000) for v in rpo["seconds_unreplicated"]
                    ],
                    "last copied offset": rpo["last_replicated_offset"],
                    "source log end": rpo["log_end_offset"],
                    "watermark": [fmt.when(int(v), view.now_ms) for v in rpo["observed_at_ms"]],
                }
            ),
            hide_index=True,
            width="stretch",
        )
    plan_section(view, flow, chosen)


def plan_section(view: View, flow: str, groups: list[str]) -> None:
    """The failover plan for ``flow`` and ``groups``: filled by ``mirrorlake failover plan`` once it exists."""
    st.subheader("Plan")
    st.info(
        f"A plan for a chosen time (per partition: target offset, lost, re-read) and the consistent cut come from "
        f"`mirrorlake failover plan --flow '{flow}'`; this page will show its figures. Applying a failover stays a "
        "CLI action. Applied failovers will be listed here once the replicator records them as events."
    )
