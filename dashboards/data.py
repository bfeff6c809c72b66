"""What the dashboard shows, as plain queries over the lakehouse (testable without Streamlit)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from lakehouse.sql import LakehouseSQL

__all__ = ["FlowOverview", "flow_overview", "mapping_segments", "translate", "rpo_now", "failover_now"]


@dataclass(frozen=True)
class FlowOverview:
    flow: str
    source_cluster: str
    target_cluster: str
    topics: int
    partitions: int
    segments: int
    last_synced_ms: int


def flow_overview(sql: LakehouseSQL) -> list[FlowOverview]:
    if "offset_mapping" not in sql.views:
        return []
    rows = sql.query(
        "SELECT flow, any_value(source_cluster), any_value(target_cluster), count(DISTINCT source_topic), "
        "count(DISTINCT (source_topic, partition)), count(*), max(last_synced_ms) "
        "FROM offset_mapping GROUP BY flow ORDER BY flow"
    ).rows
    return [FlowOverview(*row) for row in rows]


def mapping_segments(sql: LakehouseSQL, flow: str, topic: str | None = None) -> pd.DataFrame:
    where, params = "flow = ?", [flow]
    if topic:
        where, params = where + " AND source_topic = ?", [flow, topic]
    return sql.arrow(
        "SELECT source_topic, target_topic, partition, upstream_start, upstream_end, downstream_start, "
        f"downstream_end, delta FROM offset_mapping WHERE {where} "
        "ORDER BY source_topic, partition, downstream_start",
        params,
    ).to_pandas()


def translate(sql: LakehouseSQL, flow: str, topic: str, partition: int, offset: int) -> int | None:
    return sql.query("SELECT translate_offset(?, ?, ?, ?)", [flow, topic, partition, offset]).rows[0][0]


def rpo_now(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Each partition's latest RPO observation (gold ``rpo``); empty before the first watermark."""
    if "rpo" not in sql.views:
        return pd.DataFrame()
    return sql.arrow(
        "SELECT source_topic, partition, records_unreplicated, records_expired_unreplicated, "
        "seconds_unreplicated, last_replicated_offset, log_end_offset, "
        "epoch_ms(observed_at_ms) AS observed_at FROM rpo_now(?)",
        [flow],
    ).to_pandas()


def failover_now(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Per group and partition: what a failover now loses and re-reads (gold ``rpo_groups``)."""
    if "rpo_groups" not in sql.views:
        return pd.DataFrame()
    return sql.arrow(
        'SELECT "group", source_topic, partition, committed_offset, resume_offset, method, exact_offset, '
        "records_lost_total, records_reread, records_duplicated FROM failover_now(?)",
        [flow],
    ).to_pandas()
