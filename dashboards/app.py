"""The Streamlit dashboard: one page per question an on-call engineer asks, time travel on all of them.

Run by ``mirrorlake dashboard`` (``streamlit run dashboards/app.py -- --config FILE``); reads the
lakehouse through DuckDB only, never Spark, so it starts in a second. Pages live in
``dashboards.views``; each gets the same ``View`` (lakehouse as of the sidebar's choice). User
mistakes and a missing lakehouse are messages naming the command that fixes them, not tracebacks.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import streamlit as st

from dashboards import fmt
from dashboards.sidebar import as_of_selector, auto_refresh
from dashboards.view import View, open_view
from dashboards.views import PAGES, Page
from lakehouse.api import Lakehouse
from lakehouse.sql import TableNotFoundError
from replicator.config import load_config
from replicator.errors import MirrorlakeError


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=os.environ.get("MIRRORLAKE_CONFIG", "conf/local.yaml"))
    args, _ = parser.parse_known_args(sys.argv[1:])
    return args


def _open() -> View | str:
    """The view the sidebar asks for, or the message to show instead of every page."""
    config_path = _args().config
    try:
        config = load_config(config_path)
    except MirrorlakeError as exc:
        return f"Cannot read the configuration: {exc}"
    lake = Lakehouse(config)
    now_ms = int(time.time() * 1000)
    history = lake.history()
    if not any(name in history for name in ("offset_mapping", "rpo", "topology", "divergence")):
        return (
            f"No lakehouse tables at `{lake.paths.root}` yet. Fill it with `mirrorlake replicate --config "
            f"{config_path}` and `mirrorlake lakehouse build --config {config_path}` (or run `make demo`)."
        )
    try:
        as_of, label = as_of_selector(history, now_ms)
    except MirrorlakeError as exc:
        st.sidebar.error(str(exc))
        as_of, label = None, None
    try:
        view = open_view(config, as_of, label)
    except TableNotFoundError as exc:
        return f"{exc}"
    except MirrorlakeError as exc:
        st.sidebar.error(str(exc))
        view = open_view(config, None, None)
    if view.live:
        last = max((v[-1][1] for v in history.values() if v), default=None)
        auto_refresh(lake, last, now_ms)
    return view


def _runner(page: Page, view: View | str) -> Callable[[], None]:
    def run() -> None:
        st.title(page.title)
        if isinstance(view, str):
            st.info(view)
            return
        if not view.live:
            st.warning(
                f"Time travel: this is the lakehouse as of **{view.as_of_label}**. "
                "Choose *Latest (live)* in the sidebar to return to now.",
                icon=":material/history:",
            )
        try:
            page.render(view)
        except MirrorlakeError as exc:
            st.error(str(exc))

    run.__name__ = page.slug
    return run


def main() -> None:
    st.set_page_config(page_title="mirrorlake", page_icon=":material/sync_alt:", layout="wide")
    st.sidebar.markdown("## mirrorlake")
    view = _open()
    pages = [
        st.Page(_runner(page, view), title=page.title, icon=page.icon, url_path=page.slug, default=i == 0)
        for i, page in enumerate(PAGES)
    ]
    try:
        st.navigation(pages, position="top").run()
    finally:
        if isinstance(view, View):
            view.close()
            st.sidebar.caption(f"Times in UTC · judged at {fmt.utc(view.now_ms)}")


main()
