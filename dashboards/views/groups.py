"""Consumer groups: committed, translated and exact offsets, translation error, and a failover's cost now."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import data, fmt
from dashboards.view import View
from dashboards.views.common import flow_picker

__all__ = ["render", "group_table"]

_COSTS = ("unreplicated", "lost", "re-read", "duplicated")
_NUMBERS = ("committed", "checkpoint", "exact", "error", "unreplicated", "lost", "re-read", "duplicated")


def group_table(rows: pd.DataFrame, now_ms: int) -> pd.DataFrame:
    """The rows as people read them: one line per group and partition, costs of failing over now."""
    return pd.DataFrame(
        {
            "group": rows["group"],
            "partition": rows["source_topic"] + "[" + rows["partition"].astype(str) + "]",
            "committed": rows["committed_offset"],
            "checkpoint": rows["translated_offset"],
            "exact": rows["exact_offset"],
            "method": rows["method"],
            "error": rows["translation_error"],
            "unreplicated": rows["records_unreplicated"],
            "lost": rows["records_lost"],
            "re-read": rows["records_reread"],
            "duplicated": rows["records_duplicated"],
            "checkpoint time": [fmt.when(None if pd.isna(v) else int(v), now_ms) for v in rows["as_of_ms"]],
        }
    )


def render(view: View) -> None:
    flow = flow_picker(view)
    if flow is None:
        return
    rows = view.get(data.groups, flow)
    if rows.empty:
        st.info(
            "No consumer-group checkpoint for this flow yet: groups must commit offsets on the source; "
            "`mirrorlake replicate` checkpoints them every `emit_checkpoints_interval_seconds`, "
            "then `mirrorlake lakehouse build`."
        )
        return
    cols = st.columns(5)
    cols[0].metric("Groups", fmt.count(rows["group"].nunique()))
    cols[1].metric(
        "Lost on failover now",
        fmt.count(rows["records_lost_total"].sum(min_count=1)),
        help="not replicated yet + replicated but skipped by the resume offset",
    )
    cols[2].metric("Re-read", fmt.count(rows["records_reread"].sum(min_count=1)))
    cols[3].metric("Duplicated", fmt.count(rows["records_duplicated"].sum(min_count=1)))
    inexact = int((rows["translation_error"].fillna(0) != 0).sum())
    cols[4].metric(
        "Inexact checkpoints", fmt.count(inexact), help="checkpoint offset differs from the exact translation"
    )
    st.caption(
        "committed: the group's offset on the source · checkpoint: where the replicator (or MM2) would resume it "
        "on the target · exact: the lakehouse's exact translation · error = checkpoint - exact "
        "(negative: re-read, positive: skipped) · lost/re-read/duplicated: resuming at the checkpoint now."
    )
    table = group_table(rows, view.now_ms)
    costs_known = rows["records_lost_total"].notna().any()
    if not costs_known:
        table = table.drop(columns=list(_COSTS))
    st.dataframe(
        table,
        hide_index=True,
        width="stretch",
        column_config={c: st.column_config.NumberColumn(c, format="localized") for c in _NUMBERS if c in table},
    )
    if not costs_known:
        st.info(
            "The failover cost per group needs gold `rpo_groups` (a source watermark and the mapping): "
            "run `mirrorlake lakehouse build` after `mirrorlake replicate` has observed the source."
        )
        return
    st.subheader("Per group")
    for group, part in table.groupby("group"):
        lost, reread, dup = (part[c].sum(min_count=1) for c in ("lost", "re-read", "duplicated"))
        unrep = part["unreplicated"].sum(min_count=1)
        st.markdown(
            f"**{group}**: failing over now loses {fmt.count(_add(unrep, lost), 'record')} "
            f"({fmt.count(unrep)} not replicated yet, {fmt.count(lost)} skipped), re-reads "
            f"{fmt.count(reread, 'record')}, sees {fmt.count(dup, 'duplicate')}."
        )


def _add(a: float | None, b: float | None) -> float | None:
    known = [v for v in (a, b) if v is not None and not pd.isna(v)]
    return sum(known) if known else None
