"""Queries behind the Overview and the Lag/RPO pages: per-flow health, topology, time series.

Plain functions over a ``LakehouseSQL`` (testable without Streamlit). A table that does not
exist yet (or did not exist at the "as of" moment) gives an empty answer, never an error: the
page then says which command fills it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from dashboards.status import FlowHealth, ProcessState, flow_lifecycle
from lakehouse.sql import LakehouseSQL

__all__ = [
    "flows",
    "flow_health",
    "flow_rates",
    "FlowRates",
    "topology",
    "lag_series",
    "heartbeat_series",
    "has",
    "tables",
    "frame",
]


def has(sql: LakehouseSQL, *views: str) -> bool:
    return all(v in sql.views for v in views)


def tables(sql: LakehouseSQL) -> list[str]:
    """The tables (views) there are (as of the view's moment)."""
    return list(sql.views)


def frame(sql: LakehouseSQL, needs: str, query: str, params: list[object] | None = None) -> pd.DataFrame:
    """``query``'s rows; an empty frame when the table ``needs`` does not exist (yet, or as of then)."""
    if not has(sql, needs):
        return pd.DataFrame()
    return sql.arrow(query, params).to_pandas()


def _scalar(sql: LakehouseSQL, query: str, params: list[object]) -> object:
    rows = sql.query(query, params).rows
    return rows[0][0] if rows else None


def flows(sql: LakehouseSQL, configured: Iterable[str] = ()) -> list[str]:
    """Every flow the config names or any table has seen, sorted."""
    seen = set(configured)
    for view in ("offset_mapping", "rpo", "group_offsets", "divergence"):
        if has(sql, view):
            seen.update(r[0] for r in sql.query(f"SELECT DISTINCT flow FROM {view}").rows)
    return sorted(seen)


def flow_health(sql: LakehouseSQL, flow: str) -> FlowHealth:
    """What the lakehouse says about ``flow`` (see ``dashboards.status`` for how it is judged)."""
    values: dict[str, object] = {}
    if has(sql, "heartbeat_latency"):
        values["last_heartbeat_ms"] = _scalar(
            sql, "SELECT max(received_at_ms) FROM heartbeat_latency WHERE flow = ?", [flow]
        )
    if has(sql, "offset_sync"):
        values["last_sync_ms"] = _scalar(sql, "SELECT max(emitted_at_ms) FROM offset_sync WHERE flow = ?", [flow])
    if has(sql, "rpo"):
        row = sql.query(
            "SELECT sum(records_unreplicated), max(seconds_unreplicated), sum(records_expired_unreplicated), "
            "sum(records_deleted_on_target) FROM rpo_now(?)",
            [flow],
        ).rows[0]
        at_risk = None if row[0] is None else row[0] + (row[3] or 0)  # deleted copies are lost to a failover
        values.update(records_at_risk=at_risk, seconds_at_risk=row[1], records_expired=row[2])
        values.update(records_deleted_on_target=row[3])
    if has(sql, "lifecycle"):
        rows = sql.query(
            "SELECT replicator_id, state, reason, emitted_at_ms FROM lifecycle WHERE flow = ? "
            "QUALIFY row_number() OVER (PARTITION BY replicator_id ORDER BY emitted_at_ms DESC, event_id DESC) = 1",
            [flow],
        ).rows
        state, reason = flow_lifecycle([ProcessState(*row) for row in rows])
        values.update(lifecycle_state=state, lifecycle_reason=reason)
    if has(sql, "rpo_groups"):
        values["groups_losing_records"] = _scalar(
            sql, 'SELECT count(DISTINCT "group") FROM rpo_groups WHERE flow = ? AND records_lost > 0', [flow]
        )
    if has(sql, "divergence"):
        compacted = _scalar(sql, "SELECT sum(records_compacted_on_target) FROM compacted_on_target(?)", [flow])
        at_risk = values.get("records_at_risk")
        if isinstance(compacted, int) and compacted:  # lost to a failover like deleted copies (audited windows)
            values["records_compacted_on_target"] = compacted
            if isinstance(at_risk, int):
                values["records_at_risk"] = at_risk + compacted
        values["unexpected_divergences"] = _scalar(
            sql, "SELECT count(*) FROM divergence WHERE flow = ? AND NOT coalesce(expected, false)", [flow]
        )
    return FlowHealth(flow=flow, **{k: v for k, v in values.items() if v is not None})  # type: ignore[arg-type]


@dataclass(frozen=True)
class FlowRates:
    """Rates between each partition's two latest source watermarks, summed over partitions."""

    replicated_per_s: float | None  # last replicated offset's progress
    produced_per_s: float | None  # source log-end's progress


def flow_rates(sql: LakehouseSQL, flow: str) -> FlowRates:
    if not has(sql, "rpo"):
        return FlowRates(None, None)
    row = sql.query(
        """
        WITH o AS (
            SELECT source_topic, partition, observed_at_ms AS t, last_replicated_offset AS r, log_end_offset AS e,
                   row_number() OVER (PARTITION BY source_topic, partition ORDER BY observed_at_ms DESC) AS n
            FROM rpo WHERE flow = ?)
        SELECT sum((a.r - b.r) * 1000.0 / (a.t - b.t)), sum((a.e - b.e) * 1000.0 / (a.t - b.t))
        FROM o a JOIN o b USING (source_topic, partition)
        WHERE a.n = 1 AND b.n = 2 AND a.t > b.t
        """,
        [flow],
    ).rows[0]
    return FlowRates(row[0], row[1])


def topology(sql: LakehouseSQL) -> pd.DataFrame:
    """One row per (origin cluster, cluster its heartbeats reached): path, latencies, last seen."""
    return frame(
        sql,
        "topology",
        "SELECT origin_cluster, cluster, hops, path, last_seen_ms, latest_latency_ms, latest_hop_latency_ms, "
        "paths, observations FROM topology ORDER BY hops, origin_cluster, cluster",
    )


def lag_series(sql: LakehouseSQL, flow: str) -> pd.DataFrame:
    """Every RPO observation of ``flow``: time, ``partition`` label, records/bytes/seconds at risk."""
    return frame(
        sql,
        "rpo",
        "SELECT epoch_ms(observed_at_ms) AS time, observed_at_ms, "
        "source_topic || '[' || partition || ']' AS partition, "
        "records_unreplicated, bytes_unreplicated, seconds_unreplicated, records_expired_unreplicated "
        "FROM rpo WHERE flow = ? ORDER BY observed_at_ms, source_topic, partition",
        [flow],
    )


def heartbeat_series(sql: LakehouseSQL) -> pd.DataFrame:
    """Every observed heartbeat: time received, path, end-to-end and last-hop latency (ms)."""
    return frame(
        sql,
        "heartbeat_latency",
        "SELECT epoch_ms(received_at_ms) AS time, received_at_ms, path, latency_ms, hop_latency_ms "
        "FROM heartbeat_latency ORDER BY received_at_ms, path",
    )
