"""Lag and RPO over time: records, bytes and seconds at risk per partition, heartbeat latency per path."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import data_health as dh
from dashboards import fmt
from dashboards.view import View
from dashboards.views.common import flow_picker, time_chart, time_range

__all__ = ["render", "current_totals"]


def current_totals(series: pd.DataFrame) -> tuple[pd.Series, pd.Series | None]:
    """Totals over partitions at the latest observation time and at the one before (None if only one).

    Each partition contributes its latest value at or before a time, so partitions observed at
    slightly different moments still add up.
    """
    wide = series.pivot_table(
        index="time", columns="partition", values=["records_unreplicated", "seconds_unreplicated"], aggfunc="last"
    )
    filled = wide.sort_index().ffill()
    records = filled["records_unreplicated"].sum(axis=1, min_count=1)
    seconds = filled["seconds_unreplicated"].max(axis=1)
    now = pd.Series({"records": records.iloc[-1], "seconds": seconds.iloc[-1]})
    if len(filled) < 2:
        return now, None
    return now, pd.Series({"records": records.iloc[-2], "seconds": seconds.iloc[-2]})


def _delta(now: float, before: float | None, render) -> str | None:  # noqa: ANN001 - a formatter
    if before is None or pd.isna(before) or pd.isna(now) or now == before:
        return None
    return ("" if now > before else "-") + render(abs(now - before))  # Streamlit draws the arrow


def render(view: View) -> None:
    flow = flow_picker(view)
    if flow is None:
        return
    series = view.get(dh.lag_series, flow)
    if series.empty:
        st.info(
            "No watermark for this flow yet: `mirrorlake replicate` observes source and target partitions "
            "periodically; then `mirrorlake lakehouse build`."
        )
        return
    series["time"] = pd.to_datetime(series["time"], utc=True)
    now, before = current_totals(series)
    cols = st.columns(4)
    cols[0].metric(
        "Records at risk",
        fmt.count(now["records"]),
        _delta(now["records"], None if before is None else before["records"], fmt.count),
        delta_color="inverse",
        help="source records not replicated yet, summed over partitions (latest watermark of each)",
    )
    cols[1].metric(
        "Oldest record at risk",
        fmt.duration_ms(None if pd.isna(now["seconds"]) else now["seconds"] * 1000),
        _delta(now["seconds"], None if before is None else before["seconds"], lambda s: fmt.duration_ms(s * 1000)),
        delta_color="inverse",
    )
    expired = int(series.groupby("partition")["records_expired_unreplicated"].last().sum())
    cols[2].metric(
        "Lost to retention", fmt.count(expired, "record"), help="deleted on the source before they were copied"
    )
    latest_ms = int(series["observed_at_ms"].max())
    cols[3].metric("Last watermark", fmt.ago(latest_ms, view.now_ms), help=fmt.utc(latest_ms))
    shown = time_range(series, "lag_range")
    st.subheader("Records at risk per partition")
    time_chart(shown, "records_unreplicated", "partition", "records")
    st.subheader("Seconds at risk per partition")
    st.caption("Age of the oldest record not replicated yet, at each watermark.")
    time_chart(shown, "seconds_unreplicated", "partition", "seconds")
    if shown["bytes_unreplicated"].notna().any():
        st.subheader("Bytes at risk per partition")
        time_chart(shown, "bytes_unreplicated", "partition", "bytes")
    else:
        st.caption("Bytes at risk: unknown (no state event carries record sizes yet), shown as — rather than 0.")
    _heartbeats(view)


def _heartbeats(view: View) -> None:
    st.subheader("Heartbeat latency per path")
    beats = view.get(dh.heartbeat_series)
    if beats.empty:
        st.info("No heartbeat observed yet: `mirrorlake replicate` sends one per flow every second.")
        return
    beats["time"] = pd.to_datetime(beats["time"], utc=True)
    last = beats.groupby("path").tail(2)
    cols = st.columns(min(4, beats["path"].nunique()))
    for i, (path, rows) in enumerate(last.groupby("path")):
        values = list(rows["latency_ms"])
        delta = _delta(values[-1], values[-2] if len(values) > 1 else None, fmt.duration_ms)
        cols[i % len(cols)].metric(path, fmt.duration_ms(values[-1]), delta, delta_color="inverse")
    shown = time_range(beats, "heartbeat_range")
    time_chart(shown, "latency_ms", "path", "latency (ms)")
