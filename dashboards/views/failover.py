"""Failover (read-only): what failing a flow's groups over now would cost, from the lakehouse alone.

Today's figures are gold ``rpo_now`` (records at risk per partition) and ``failover_now`` (per
group and partition: lost, re-read, duplicated at the checkpoint's resume offset); ``plan_section``
shows ``mirrorlake failover plan``'s figures (the ``failover_plan`` macro: the exact translation's
target offset and cost) and the flow's ``consistent_cut``. Applying a failover stays a CLI action.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import data, fmt
from dashboards.freshness import freshness
from dashboards.view import View
from dashboards.views.common import flow_picker
from replicator.config import FlowConfig
from replicator.errors import ConfigError

__all__ = ["render", "plan_section"]


def _sum(values: pd.Series) -> float | None:
    total = values.sum(min_count=1)
    return None if pd.isna(total) else float(total)


def _max(values: pd.Series) -> float | None:
    top = values.max()
    return None if pd.isna(top) else float(top)


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
    st.caption("If the source cluster were gone now and every consumer group moved to the target.")
    groups = sorted(costs["group"].unique()) if not costs.empty else []
    chosen = st.multiselect("Groups", groups, default=groups, key="failover_groups") if groups else []
    picked = costs[costs["group"].isin(chosen)] if not costs.empty else costs
    at_risk = None if rpo.empty else _sum(rpo["records_unreplicated"])
    oldest = None if rpo.empty else _max(rpo["seconds_unreplicated"])
    fresh = None if rpo.empty else freshness(rpo["observed_at_ms"], view.now_ms, _interval_s(view, flow))
    cols = st.columns(5)
    at_risk_text = fresh.bound(at_risk) if fresh else fmt.count(at_risk)
    cols[0].metric("Records at risk (RPO)", at_risk_text, help="source records not replicated yet")
    oldest_text = fresh.older_by_age(oldest) if fresh else fmt.UNKNOWN
    cols[1].metric("Oldest at risk", oldest_text, help="age of the oldest source record not replicated yet")
    lost = None if picked.empty else _sum(picked["records_lost"])
    cols[2].metric(
        "Lost by resuming",
        fmt.count(lost),
        help="replicated records the groups would skip, resuming where their checkpoints say (not yet "
        "replicated records are the records at risk, beside)",
    )
    cols[3].metric("Re-read", fmt.count(None if picked.empty else _sum(picked["records_reread"])))
    cols[4].metric("Duplicated", fmt.count(None if picked.empty else _sum(picked["records_duplicated"])))
    if fresh is not None and fresh.stale:
        st.error(
            f"Not measured for {fmt.duration_ms(fresh.age_ms)}: a failover now loses at least "
            f"{fmt.count(at_risk or 0, 'record')} not replicated yet, and whatever the source took since "
            f"({fresh.caption(view.now_ms)})."
        )
    elif not at_risk and not lost:
        st.success("Safe to fail over now: nothing at risk, no group would lose records.")
    else:
        st.warning(f"A failover now loses data: {fmt.count(at_risk or 0, 'record')} not replicated yet.")
    if fresh is not None and not fresh.stale:
        st.caption(f"Records at risk {fresh.caption(view.now_ms)}.")
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
                    "not yet replicated": picked["records_unreplicated"],
                    "lost by resuming here": picked["records_lost"],
                    "re-read": picked["records_reread"],
                    "duplicated": picked["records_duplicated"],
                    # eleven columns: the age alone fits (the caption above has the moment in full)
                    "as of": [fmt.ago(None if pd.isna(v) else int(v), view.now_ms) for v in picked["as_of_ms"]],
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
                    "deleted before their copy": rpo["records_expired_unreplicated"],
                    "oldest at risk": [
                        fmt.duration_ms(None if pd.isna(v) else v * 1000) for v in rpo["seconds_unreplicated"]
                    ],
                    # where the flow stands (everything before it is on the target) at the watermark;
                    # an offset sync comes only every so many copies, so its offset trails the copies
                    "replicated up to": rpo["read_position"],
                    "last offset sync": rpo["last_replicated_offset"],
                    "source log end": rpo["log_end_offset"],
                    "watermark": [fmt.when(int(v), view.now_ms) for v in rpo["observed_at_ms"]],
                }
            ),
            hide_index=True,
            width="stretch",
        )
    plan_section(view, flow, chosen)


def _interval_s(view: View, flow: str) -> float:
    """The flow's watermark interval (the default for a flow the configuration does not name)."""
    try:
        return view.config.flow(flow).watermarks_interval_seconds
    except ConfigError:
        return float(FlowConfig.model_fields["watermarks_interval_seconds"].default)


def plan_section(view: View, flow: str, groups: list[str]) -> None:
    """``mirrorlake failover plan``'s figures for ``flow`` and ``groups``, and the flow's consistent cut.

    Read from the lakehouse macros ``failover_plan(flow)`` and ``consistent_cut(flow)`` (the CLI computes
    the same from the state topic); nothing here applies a failover.
    """
    st.subheader("Plan at the exact translation")
    plan = view.get(data.failover_plan, flow)
    cut = view.get(data.consistent_cut, flow)
    cut_ms = None if cut.empty or pd.isna(cut["cut_ms"].iloc[0]) else int(cut["cut_ms"].iloc[0])
    cols = st.columns([2, 1, 1, 1])
    cols[0].metric(
        "Consistent cut",
        fmt.moment(cut_ms, view.now_ms) if cut_ms is not None else "unknown",
        help="every partition of the flow is replicated up to this time (the first record not copied yet)"
        + (f": {fmt.utc(cut_ms)}" if cut_ms is not None else ""),
    )
    cols[1].metric("Cut is", fmt.ago(cut_ms, view.now_ms) if cut_ms is not None else "n/a")
    picked = plan[plan["group"].isin(groups)] if not plan.empty else plan
    exact = "at the exact translation of each group's checkpoint"
    lost = None if picked.empty else _sum(picked["records_lost"])
    cols[2].metric("Lost by resuming (exact)", fmt.count(lost), help=exact)
    cols[3].metric("Re-read (exact)", fmt.count(None if picked.empty else _sum(picked["records_reread"])), help=exact)
    if picked.empty:
        st.info(
            "No plan yet: it needs group checkpoints and watermarks (`mirrorlake replicate`, then "
            "`mirrorlake lakehouse build`). The CLI gives the same figures: "
            + fmt.code("mirrorlake failover plan --flow " + repr(flow))
            + "."
        )
    else:
        st.dataframe(
            pd.DataFrame(
                {
                    "group": picked["group"],
                    "partition": picked["source_topic"] + "[" + picked["partition"].astype(str) + "]",
                    "committed": picked["committed_offset"],
                    "target offset": picked["target_offset"],
                    "lost by resuming here": picked["records_lost"],
                    "re-read": picked["records_reread"],
                    "not yet replicated": picked["partition_records_unreplicated"],
                    "as of": [fmt.when(None if pd.isna(v) else int(v), view.now_ms) for v in picked["as_of_ms"]],
                }
            ),
            hide_index=True,
            width="stretch",
        )
    st.subheader("Failovers applied")
    applied = view.get(data.failovers_applied, flow)
    if applied.empty:
        command = fmt.code("mirrorlake failover apply --flow " + repr(flow))
        st.caption(f"None. Applying stays a CLI action: {command}.")
    else:
        st.dataframe(
            pd.DataFrame(
                {
                    "applied": [fmt.when(int(v), view.now_ms) for v in applied["applied_at_ms"]],
                    "mode": applied["mode"],
                    "groups": applied["groups"],
                    "lost by resuming": applied["records_lost"],
                    "re-read": applied["records_reread"],
                    "consistent cut": [fmt.utc(None if pd.isna(v) else int(v)) for v in applied["consistent_cut_ms"]],
                    "outcome": applied.get("outcome", pd.Series([None] * len(applied))),
                    "re-read measured": applied.get("outcome_records_reread", pd.Series([None] * len(applied))),
                    "by": applied["user"],
                }
            ),
            hide_index=True,
            width="stretch",
        )
        st.caption(
            "Outcome: the groups' first committed offsets on the target after the failover, as the reverse "
            "flow's checkpoints saw them (resumed / rewound / not_observed until a reverse flow runs)."
        )
    st.subheader("Failback steps")
    back = view.get(data.failbacks_applied, flow)
    if back.empty:
        st.caption(
            f"None. Failback is a CLI action once the source is back: `mirrorlake failback plan --flow '{flow}'`."
        )
        return
    st.dataframe(
        pd.DataFrame(
            {
                "applied": [fmt.when(int(v), view.now_ms) for v in back["applied_at_ms"]],
                "action": back["action"],
                "records": back["records"],
                "ranges": back["ranges"],
                "bytes": back["bytes"],
                "groups": back["groups"],
                "offsets written": back["offsets_written"],
                "by": back["user"],
            }
        ),
        hide_index=True,
        width="stretch",
    )
