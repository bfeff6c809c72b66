"""``failovers`` in DuckDB for the touched flows: the twin of ``lakehouse.tables.failovers``.

A flow's rows are its failover events' offsets, each with the outcome the reverse flow's
checkpoints show after it; any new checkpoint of a reverse flow touches its forward flow, so a
flow is recomputed whole, from its few failover events and the reverse flow's checkpoints of the
groups and partitions they wrote (the scan skips the other flows' row groups).
"""

from __future__ import annotations

from lakehouse.duck.delta import table_schema
from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, keys_filter
from lakehouse.tables.failovers import SPEC

__all__ = ["TWIN"]

_FORWARD = "target_cluster || '->' || source_cluster"  # the flow a reverse flow's event belongs back to


def _tail(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    touched = []
    if "failover" in inputs.changes:
        touched.append(f"SELECT flow FROM {inputs.new('failover')}")
    if "checkpoint" in inputs.changes:
        touched.append(f"SELECT {_FORWARD} AS flow FROM {inputs.new('checkpoint')}")
    keys = con.sql(" UNION ".join(touched)).to_arrow_table()
    if inputs.versions.get("failover") is None or not keys.num_rows:
        return DuckTail(table_schema(inputs.paths.gold("failovers")).empty_table(), keys)
    con.execute(
        f"""CREATE TEMP TABLE applied AS
        SELECT flow, event_id AS failover_event_id, emitted_at_ms AS applied_at_ms, mode, at_ms,
               source_cluster, target_cluster, o."group" AS "group", o.source_topic AS source_topic,
               o.target_topic AS target_topic, o."partition" AS "partition",
               o.committed_offset AS committed_offset, o."offset" AS target_offset,
               o.records_lost AS records_lost, o.records_reread AS records_reread,
               o.records_unreplicated AS records_unreplicated,
               records_unreplicated AS flow_records_unreplicated, bytes_unreplicated AS flow_bytes_unreplicated,
               seconds_unreplicated AS flow_seconds_unreplicated, consistent_cut_ms, "user", host
        FROM (SELECT *, unnest(offsets) AS o FROM {inputs.silver("failover")} WHERE {keys_filter(keys)})"""
    )
    row_id = 'a.failover_event_id, a."group", a.source_topic, a."partition"'
    point = "STRUCT(t BIGINT, c BIGINT)"
    observed = (
        'SELECT NULL::VARCHAR AS failover_event_id, NULL::VARCHAR AS "group", NULL::VARCHAR AS source_topic, '
        f'NULL::INTEGER AS "partition", NULL::{point} AS _first, NULL::{point} AS _last WHERE false'
    )
    reverse = con.sql(f"SELECT DISTINCT {_FORWARD} AS flow FROM applied").to_arrow_table()
    if inputs.versions.get("checkpoint") is not None and reverse.num_rows:
        observed = f"""
            SELECT {row_id},
                   min(struct_pack(t := c.emitted_at_ms, c := c.upstream_offset)) AS _first,
                   max(struct_pack(t := c.emitted_at_ms, c := c.upstream_offset)) AS _last
            FROM applied a JOIN (SELECT * FROM {inputs.silver("checkpoint")} WHERE {keys_filter(reverse)}) c
              ON {_FORWARD.replace("target_cluster", "c.target_cluster").replace("source_cluster", "c.source_cluster")}
                 = a.flow
             AND c.flow = a.target_cluster || '->' || a.source_cluster
             AND c."group" = a."group" AND c.source_topic = a.target_topic AND c."partition" = a."partition"
             AND c.emitted_at_ms > a.applied_at_ms
            GROUP BY ALL"""
    rows = con.sql(
        f"""
        SELECT a.*, o._first.c AS outcome_first_offset, o._first.t AS outcome_first_at_ms,
               o._last.c AS outcome_offset, o._last.t AS outcome_at_ms,
               CASE WHEN o._first.c IS NOT NULL THEN greatest(0, a.target_offset - o._first.c) END::BIGINT
                   AS outcome_records_reread,
               (o._last.c - a.target_offset)::BIGINT AS outcome_records_consumed,
               CASE WHEN o._first.c IS NULL THEN 'not_observed' WHEN o._first.c >= a.target_offset THEN 'resumed'
                    ELSE 'rewound' END AS outcome
        FROM applied a LEFT JOIN ({observed}) o
          ON o.failover_event_id = a.failover_event_id AND o."group" = a."group"
         AND o.source_topic = a.source_topic AND o."partition" = a."partition"
        """
    ).to_arrow_table()
    return DuckTail(rows, keys)


TWIN = Twin(SPEC, tail=_tail)
