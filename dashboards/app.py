"""The Streamlit dashboard: flows, their exact offset mapping, and a translation box.

Run by ``mirrorlake dashboard`` (``streamlit run dashboards/app.py -- --config FILE``); reads
the lakehouse through DuckDB only, never Spark, so it starts in a second.
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import UTC, datetime

import streamlit as st

from dashboards.data import failover_now, flow_overview, mapping_segments, rpo_now, translate
from lakehouse.sql import LakehouseSQL
from replicator.config import load_config
from replicator.errors import MirrorlakeError


def _args() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=os.environ.get("MIRRORLAKE_CONFIG", "conf/local.yaml"))
    args, _ = parser.parse_known_args(sys.argv[1:])
    return args


def main() -> None:
    st.set_page_config(page_title="mirrorlake", layout="wide")
    st.title("mirrorlake")
    args = _args()
    try:
        config = load_config(args.config)
        sql = LakehouseSQL(config.lakehouse.path)
    except MirrorlakeError as exc:
        st.error(str(exc))
        return
    flows = flow_overview(sql)
    if not flows:
        st.info("No offset mapping yet: run `mirrorlake replicate` and `mirrorlake lakehouse build`.")
        return
    st.subheader("Flows")
    st.dataframe(
        [
            {
                "flow": f.flow,
                "topics": f.topics,
                "partitions": f.partitions,
                "mapping segments": f.segments,
                "last sync (UTC)": datetime.fromtimestamp(f.last_synced_ms / 1000, tz=UTC).strftime(
                    "%Y-%m-%d %H:%M:%S"
                ),
            }
            for f in flows
        ],
        hide_index=True,
    )
    flow = st.selectbox("Flow", [f.flow for f in flows])
    segments = mapping_segments(sql, flow)
    st.subheader(f"Offset mapping of {flow}")
    st.caption("One row per run of constant downstream - upstream; gaps and replays start new rows.")
    st.dataframe(segments, hide_index=True)
    if not segments.empty:
        chart = segments.groupby(["source_topic", "partition"]).size().reset_index(name="segments")
        chart["topic-partition"] = chart["source_topic"] + "-" + chart["partition"].astype(str)
        st.bar_chart(chart, x="topic-partition", y="segments")
        st.subheader("Translate a committed offset")
        topics = sorted(segments["source_topic"].unique())
        col1, col2, col3 = st.columns(3)
        topic = col1.selectbox("Source topic", topics)
        partitions = sorted(segments.loc[segments["source_topic"] == topic, "partition"].unique())
        partition = col2.selectbox("Partition", partitions)
        offset = col3.number_input("Committed source offset", min_value=0, value=0, step=1)
        result = translate(sql, flow, topic, int(partition), int(offset))
        st.metric("Target offset", "no copy yet" if result is None else int(result))
    rpo = rpo_now(sql, flow)
    if not rpo.empty:
        st.subheader("Records at risk now (RPO)")
        st.caption("Latest source watermark per partition; bytes are not known yet (no event carries sizes).")
        st.dataframe(rpo, hide_index=True)
    failover = failover_now(sql, flow)
    if not failover.empty:
        st.subheader("If the groups failed over now")
        st.caption("Lost = not replicated or skipped; re-read = copies before the committed offset.")
        st.dataframe(failover, hide_index=True)


main()
