"""Divergence: where targets differ from their sources, grouped by kind, with filters.

Config rows put the effective source and target values side by side (with why a difference is
expected, when the flow never syncs that key); data rows show both sides' record count and
checksum of each audit window that differs.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import data, fmt
from dashboards import data_health as dh
from dashboards.view import View

__all__ = ["render", "KIND_TITLES", "apply_filters"]

KIND_TITLES = {
    "missing_target_topic": "Topics missing on the target",
    "missing_source_topic": "Topics missing on the source",
    "partition_count": "Partition counts",
    "config": "Topic configs (effective values)",
    "acl_missing_on_target": "ACLs missing on the target",
    "acl_extra_on_target": "ACLs only on the target",
    "data": "Data windows (record count and checksum)",
    "target_records_compacted": "Copies removed by compaction on the target (data windows)",
    "target_records_deleted": "Copies deleted from the target (retention, delete-records)",
}


def apply_filters(rows: pd.DataFrame, flows: list[str], kinds: list[str], topic: str, expected: bool) -> pd.DataFrame:
    keep = rows["flow"].isin(flows) & rows["kind"].isin(kinds)
    if topic:
        keep &= rows["source_topic"].str.contains(topic, case=False, regex=False)
    if not expected:
        keep &= ~rows["expected"].eq(True)
    return rows[keep]


def _section(kind: str, rows: pd.DataFrame, now_ms: int) -> None:
    seen = [fmt.when(int(v), now_ms) for v in rows["observed_at_ms"]]
    if kind == "config":
        table = pd.DataFrame(
            {
                "topic": rows["source_topic"],
                "config": rows["item"],
                "source value": rows["source_value"],
                "target value": rows["target_value"],
                "expected": rows["expected"],
                "why expected": rows["exclusion_reason"].fillna(""),
                "observed": seen,
            }
        )
    elif kind in ("data", "target_records_compacted"):
        table = pd.DataFrame(
            {
                "topic": rows["source_topic"],
                "partition": rows["partition"],
                "window (source offsets)": [
                    f"{int(a)}–{int(b)}" for a, b in zip(rows["window_start"], rows["window_end"], strict=True)
                ],
                "source": rows["source_value"],
                "target": rows["target_value"],
                "observed": seen,
            }
        )
    else:
        table = pd.DataFrame(
            {
                "topic": rows["source_topic"],
                "target topic": rows["target_topic"],
                "item": rows["item"],
                "source": rows["source_value"],
                "target": rows["target_value"],
                "observed": seen,
            }
        )
    st.dataframe(table, hide_index=True, width="stretch")


def render(view: View) -> None:
    rows = view.get(data.divergence)
    if "divergence" not in view.get(dh.tables):
        st.info(
            "No divergence report yet: `mirrorlake replicate` publishes config snapshots and audit windows of both "
            "sides; then `mirrorlake lakehouse build`."
        )
        return
    if rows.empty:
        st.success("No divergence: every compared topic, partition count, config, ACL and data window matches.")
        return
    c1, c2, c3, c4 = st.columns([2, 3, 2, 1])
    flows = c1.multiselect("Flows", sorted(rows["flow"].unique()), default=sorted(rows["flow"].unique()))
    all_kinds = [k for k in KIND_TITLES if k in set(rows["kind"])] + sorted(set(rows["kind"]) - set(KIND_TITLES))
    kinds = c2.multiselect("Kinds", all_kinds, default=all_kinds, format_func=lambda k: KIND_TITLES.get(k, k))
    topic = c3.text_input("Topic contains", key="divergence_topic")
    expected = c4.checkbox("Show expected", value=True, help="differences in keys the flow never syncs")
    shown = apply_filters(rows, flows, kinds, topic, expected)
    unexpected = int((~rows["expected"].eq(True)).sum())
    cols = st.columns(3)
    cols[0].metric("Differences", fmt.count(len(rows)))
    cols[1].metric("Unexpected", fmt.count(unexpected))
    cols[2].metric("Shown", fmt.count(len(shown)))
    if shown.empty:
        st.info("No difference matches the filters.")
        return
    for kind, part in shown.groupby("kind", sort=False):
        st.subheader(f"{KIND_TITLES.get(str(kind), str(kind))} · {len(part)}")
        _section(str(kind), part, view.now_ms)
