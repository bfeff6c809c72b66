"""Widgets several pages share."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from dashboards import data_health as dh
from dashboards import fmt
from dashboards.view import View

__all__ = ["flow_picker", "time_chart", "time_range", "time_line_chart", "Y_FORMAT"]

# d3-format: thousands separators, decimals only where the value has them. Vega-Lite's own
# default labels an all-zero series (a caught-up flow's records at risk) "0.000000".
Y_FORMAT = ",~f"


def flow_picker(view: View, *, key: str = "flow") -> str | None:
    """A flow selector (None, with the command that creates flows, when the lakehouse knows none)."""
    flows = view.get(dh.flows, tuple(view.configured_flows))
    if not flows:
        st.info("No flow seen yet: run `mirrorlake replicate`, then `mirrorlake lakehouse build` (or `make demo`).")
        return None
    if len(flows) == 1:
        st.caption(f"Flow **{fmt.text(flows[0])}**")
        return flows[0]
    return st.selectbox("Flow", flows, key=key)


_RANGES = {"5 min": 300, "15 min": 900, "1 h": 3600, "6 h": 6 * 3600, "24 h": 86400, "7 d": 7 * 86400, "All": None}


def time_range(rows: pd.DataFrame, key: str) -> pd.DataFrame:
    """A time-range picker over ``rows["time"]`` (tz-aware UTC), ending at the newest row; the rows inside it."""
    choice = st.segmented_control("Time range (up to the latest observation)", list(_RANGES), default="All", key=key)
    seconds = _RANGES.get(choice or "All")
    if seconds is None:
        return rows
    return rows[rows["time"] >= rows["time"].max() - pd.Timedelta(seconds=seconds)]


def time_chart(rows: pd.DataFrame, value: str, series: str, y_title: str) -> None:
    """One line per ``series`` value over ``rows["time"]``, with UTC time labels."""
    st.altair_chart(time_line_chart(rows, value, series, y_title), width="stretch")


def time_line_chart(rows: pd.DataFrame, value: str, series: str, y_title: str) -> alt.Chart:
    """The chart ``time_chart`` shows."""
    return (
        alt.Chart(rows)
        .mark_line(point=True)
        .encode(
            x=alt.X(
                "utcyearmonthdatehoursminutesseconds(time):T",
                title="time (UTC)",
                axis=alt.Axis(format="%H:%M:%S", labelAngle=0),
            ),
            y=alt.Y(f"{value}:Q", title=y_title, axis=alt.Axis(format=Y_FORMAT)),
            color=alt.Color(f"{series}:N", title=None, legend=alt.Legend(orient="right", labelLimit=360)),
            tooltip=[alt.Tooltip("time:T", format="%Y-%m-%d %H:%M:%S", formatType="utc"), series, value],
        )
        .properties(height=260)
    )
