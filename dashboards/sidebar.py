"""The sidebar shared by every page: the "as of" (time travel) selector and the auto-refresh.

Time travel offers every build still in the Delta logs (``dashboards.timetravel``) and, for the
CLI's ``--as-of`` habit, a free-text table version or ISO timestamp. Auto-refresh (live view only)
looks at the Delta logs every ``REFRESH_SECONDS`` and reruns the app when a table got a commit,
which is what ``mirrorlake lakehouse serve`` does every refresh; an unchanged lakehouse costs a
directory listing, never a query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import streamlit as st

from dashboards import fmt
from dashboards.timetravel import Build, builds, moment, signature
from lakehouse.api import Lakehouse
from lakehouse.catalog import table_paths
from lakehouse.sql import parse_as_of

__all__ = ["as_of_selector", "auto_refresh", "REFRESH_SECONDS", "LATEST"]

REFRESH_SECONDS = 10
LATEST = "Latest (live)"


def _label(build: Build) -> str:
    # no "(5 min ago)" here: Streamlit keys a widget by its options too, so a label that changes
    # with the clock would reset the chosen build to Latest when the minute turns
    return f"Build {build.number} · {fmt.utc(build.at_ms)}"


def as_of_selector(
    history: Mapping[str, Sequence[tuple[int, int]]], now_ms: int
) -> tuple[int | datetime | None, str | None]:
    """The chosen moment (None: latest) and how to name it; ``AsOfError`` for unparseable free text.

    ``history`` is ``Lakehouse.history()``.
    """
    st.sidebar.subheader("Time travel")
    found = list(reversed(builds(history)))
    labels = [LATEST] + [_label(b) for b in found]
    choice = st.sidebar.selectbox(
        "As of",
        range(len(labels)),
        format_func=lambda i: labels[i],
        key="as_of_build",
        help="Show every page as the lakehouse was right after that build (Delta time travel).",
    )
    if found:
        st.sidebar.caption(f"Newest build {fmt.ago(found[0].at_ms, now_ms)}")
    typed = st.sidebar.text_input(
        "or a table version / UTC time",
        key="as_of_text",
        placeholder="e.g. 3 or 2026-11-22T15:04:05Z",
        help="As `mirrorlake sql --as-of`: a version applies to every table, a time picks each table's "
        "last version committed at or before it.",
    ).strip()
    if typed:
        value = parse_as_of(typed)
        label = f"table version {value}" if isinstance(value, int) else fmt.utc(int(value.timestamp() * 1000))
        return value, label
    if choice:
        build = found[choice - 1]
        return moment(build.at_ms), _label(build)
    return None, None


def auto_refresh(lake: Lakehouse, last_commit_ms: int | None, now_ms: int) -> None:
    """Rerun the whole app when the lakehouse gets a new commit (checked every ``REFRESH_SECONDS``)."""
    tables = table_paths(lake.paths)
    st.session_state["lakehouse_signature"] = signature(tables)

    @st.fragment(run_every=REFRESH_SECONDS)
    def _watch() -> None:
        current = signature(tables)
        if current != st.session_state["lakehouse_signature"]:
            st.session_state["lakehouse_signature"] = current
            st.rerun(scope="app")
        st.caption(
            f"Live: checking for new builds every {REFRESH_SECONDS} s (e.g. `mirrorlake lakehouse serve`). "
            f"Last commit: {fmt.when(last_commit_ms, now_ms)}."
        )

    with st.sidebar:
        _watch()
