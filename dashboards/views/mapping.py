"""Offset mapping explorer: the segments of a partition as a chart and a table, forward and reverse translation."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboards import data, fmt
from dashboards.view import View
from dashboards.views.common import flow_picker

__all__ = ["render", "label_copies"]


_SEGMENT_COLUMNS = {
    "target_topic": "target topic",
    "source_topic_id": "source topic life (id)",
    "target_topic_id": "target topic life (id)",
    "upstream_start": "source from",
    "upstream_end": "source to",
    "downstream_start": "target from",
    "downstream_end": "target to",
    "delta": "target - source",
    "last_synced_ms": "last sync",
}


def label_copies(segments: pd.DataFrame) -> pd.Series:
    """``copy`` for a segment whose source range was not copied before, ``replay`` for a later copy of it;
    within one life of the source topic and of its remote topic (a re-created topic's offsets name other
    records; a re-created remote topic's copies are gone, and the source is copied into it again)."""
    order = segments.sort_values("downstream_start")
    none = pd.Series(None, index=order.index)
    source_lives = order.get("source_topic_id", none)
    target_lives = order.get("target_topic_id", none)
    lives = [tuple(None if pd.isna(v) else v for v in pair) for pair in zip(source_lives, target_lives, strict=True)]
    out: dict[object, str] = {}
    seen: dict[object, list[tuple[int, int]]] = {}
    for idx, lo, hi, life in zip(order.index, order["upstream_start"], order["upstream_end"], lives, strict=True):
        copied = seen.setdefault(life, [])
        out[idx] = "replay" if any(a <= hi and lo <= b for a, b in copied) else "copy"
        copied.append((lo, hi))
    return pd.Series(out).reindex(segments.index)


def _chart(segments: pd.DataFrame) -> alt.Chart:
    seg = segments.assign(kind=label_copies(segments), segment=range(len(segments)))
    points = pd.concat(
        [
            seg.assign(upstream=seg["upstream_start"], downstream=seg["downstream_start"]),
            seg.assign(upstream=seg["upstream_end"], downstream=seg["downstream_end"]),
        ]
    )
    return (
        alt.Chart(points)
        .mark_line(point=True, strokeWidth=3)
        .encode(
            x=alt.X("upstream:Q", title="source (upstream) offset"),
            y=alt.Y("downstream:Q", title="target (downstream) offset"),
            detail="segment:N",
            color=alt.Color(
                "kind:N", title="", scale=alt.Scale(domain=["copy", "replay"], range=["#1f77b4", "#d62728"])
            ),
            tooltip=[
                "upstream_start",
                "upstream_end",
                "downstream_start",
                "downstream_end",
                "delta",
                "records",
                "kind",
            ],
        )
        .properties(height=320)
    )


def render(view: View) -> None:
    flow = flow_picker(view)
    if flow is None:
        return
    segments = view.get(data.mapping_segments, flow)
    if segments.empty:
        st.info("No offset sync for this flow yet: run `mirrorlake replicate`, then `mirrorlake lakehouse build`.")
        return
    c1, c2 = st.columns(2)
    topic = c1.selectbox("Source topic", sorted(segments["source_topic"].unique()), key="mapping_topic")
    in_topic = segments[segments["source_topic"] == topic]
    partition = int(c2.selectbox("Partition", sorted(in_topic["partition"].unique()), key="mapping_partition"))
    part = in_topic[in_topic["partition"] == partition].reset_index(drop=True)
    cols = st.columns(4)
    cols[0].metric("Segments", fmt.count(len(part)))
    cols[1].metric("Replayed segments", fmt.count(int((label_copies(part) == "replay").sum())))
    last = view.get(data.last_copied, flow, topic, partition)
    cols[2].metric("Last source offset copied", fmt.count(last) if last is not None else "none in this life yet")
    cols[3].metric("Last sync", fmt.ago(int(part["last_synced_ms"].max()), view.now_ms))
    st.caption(
        "Each line is a run of records copied with a constant target - source offset. A jump to the right is a gap "
        "in the source (transaction markers, compaction); a red line over an earlier range is a replay (at-least-once)."
    )
    if "source_topic_id" in part and (lives := part["source_topic_id"].nunique(dropna=True)) > 1:
        st.warning(
            f"The source topic was deleted and created again: {lives} lives of it were copied into the same "
            "target topic, one after the other. Translation reads the current (newest) life only."
        )
    if "target_topic_id" in part and (remote := part["target_topic_id"].nunique(dropna=True)) > 1:
        st.warning(
            f"The target topic was deleted and created again ({remote} lives of it): the copies in the old one are "
            "gone and the source was copied into the new one again. Translation reads the current (newest) life only."
        )
    st.altair_chart(_chart(part), width="stretch")
    _translate_boxes(view, flow, topic, partition, part)
    st.subheader("Segments")
    st.dataframe(
        part.drop(columns=["source_topic", "partition"])
        .assign(last_synced_ms=[fmt.when(int(v), view.now_ms) for v in part["last_synced_ms"]])
        .rename(columns=_SEGMENT_COLUMNS),
        hide_index=True,
        width="stretch",
    )


def _translate_boxes(view: View, flow: str, topic: str, partition: int, part: pd.DataFrame) -> None:
    forward, reverse = st.columns(2)
    with forward:
        st.subheader("Source → target")
        offset = st.number_input("Committed source offset", min_value=0, value=0, step=1, key="forward_offset")
        target = view.get(data.translate, flow, topic, partition, int(offset))
        if target is None:
            st.metric("Resumes on the target at", "no copy yet")
            return_note = "Nothing of this partition is replicated yet."
        else:
            st.metric("Resumes on the target at", f"{int(target)}")
            back = view.get(data.reverse_translate, flow, topic, partition, int(target))
            return_note = (
                f"Offset {offset} was copied: the consumer resumes on its latest copy."
                if back is not None and back.method == "exact" and back.upstream == offset
                else f"Offset {offset} has no copy (yet): the consumer resumes right after the last copy before it."
            )
        st.caption(return_note)
    with reverse:
        st.subheader("Target → source")
        target_offset = st.number_input("Target offset", min_value=0, value=0, step=1, key="reverse_offset")
        found = view.get(data.reverse_translate, flow, topic, partition, int(target_offset))
        if found is None:
            st.metric("Copy of source offset", "no copies yet")
            st.caption("Nothing of this partition is replicated yet.")
        elif found.method != "exact":
            st.metric("Copy of source offset", "not a copy")
            where = "after the last copy before it" if found.method == "after_last_copy" else "at the first copy"
            st.caption(
                f"No segment covers it (a record another producer wrote, or beyond the last sync): "
                f"a consumer here resumes on the source at {found.upstream}, {where}."
            )
        else:
            st.metric("Copy of source offset", f"{found.upstream}")
            if found.copies > 1:
                st.caption(f"That source record has {found.copies} copies on the target (replayed).")
