"""Time travel: the builds still in the Delta logs; the sidebar's "As of" shows every page as of one."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboards import fmt
from dashboards.timetravel import builds
from dashboards.view import View
from lakehouse.api import Lakehouse

__all__ = ["render"]


def render(view: View) -> None:
    found = builds(Lakehouse(view.config).history())
    if not found:
        st.info("No build yet: `mirrorlake lakehouse build` (or `mirrorlake lakehouse serve`).")
        return
    st.caption(
        "Each build (`mirrorlake lakehouse build`, or a refresh of `lakehouse serve`) leaves a version of every gold "
        "table it changed. Pick one under *As of* in the sidebar to see every page as it left the lakehouse; "
        "`mirrorlake sql --as-of TIME` reads the same versions."
    )
    cols = st.columns(3)
    cols[0].metric("Builds", fmt.count(len(found)))
    cols[1].metric("First", fmt.ago(found[0].at_ms, view.now_ms), help=fmt.utc(found[0].at_ms))
    cols[2].metric("Latest", fmt.ago(found[-1].at_ms, view.now_ms), help=fmt.utc(found[-1].at_ms))
    tables = sorted({t for b in found for t in b.gold_versions})
    st.dataframe(
        pd.DataFrame(
            [
                {"build": b.number, "finished": fmt.when(b.at_ms, view.now_ms)}
                | {t: b.gold_versions.get(t) for t in tables}
                for b in reversed(found)
            ]
        ),
        hide_index=True,
        width="stretch",
    )
    st.caption("Columns after *finished*: each gold table's Delta version as of that build.")
