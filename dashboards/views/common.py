"""Widgets several pages share."""

from __future__ import annotations

import streamlit as st

from dashboards import data_health as dh
from dashboards.view import View

__all__ = ["flow_picker"]


def flow_picker(view: View, *, key: str = "flow") -> str | None:
    """A flow selector (None, with the command that creates flows, when the lakehouse knows none)."""
    flows = dh.flows(view.sql, view.configured_flows)
    if not flows:
        st.info("No flow seen yet: run `mirrorlake replicate`, then `mirrorlake lakehouse build` (or `make demo`).")
        return None
    if len(flows) == 1:
        st.caption(f"Flow **{flows[0]}**")
        return flows[0]
    return st.selectbox("Flow", flows, key=key)
