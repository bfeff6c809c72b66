"""``rpo``'s tail in DuckDB: the twin of ``lakehouse.tables.rpo.spark._tail``.

A row depends on the syncs and target watermarks up to its observation (running maxima) and on the
mapping. For a touched partition whose new syncs and watermarks all come after its row at ``B``
(the last before them), that row's last copy and target log start stand for everything up to ``B``
(the carry), so the rows after ``B`` come from the silver rows after ``B`` alone. Rows up to ``B``
keep their values except the copies deleted on the target, which follow the mapping as it is now.
The counts of deleted copies run in Python (``replicator.client.failover_cost``, the reference),
only for the rows whose target log start lies above the partition's first copy.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, as_segments, keys_filter
from lakehouse.tables.offset_mapping import MAPPING_KEY
from lakehouse.tables.offset_mapping.lives import EACH_PARTITION_SQL
from lakehouse.tables.rpo import SPEC
from replicator.client.failover_cost import deleted_on_target
from replicator.client.mapping import Segment

__all__ = ["TWIN"]

_KEY = ", ".join(MAPPING_KEY)


def _on(left: str, right: str) -> str:
    return " AND ".join(f"{left}.{k} = {right}.{k}" for k in MAPPING_KEY)


def _tail(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = inputs.touched({"watermark": MAPPING_KEY, "offset_sync": MAPPING_KEY, "topic_recreated": MAPPING_KEY})
    con.register("touched", keys)
    where = keys_filter(keys)
    times = []
    if "offset_sync" in inputs.changes:
        times.append(f"SELECT {_KEY}, emitted_at_ms AS t FROM {inputs.new('offset_sync')}")
    if "watermark" in inputs.changes:
        times.append(f"SELECT {_KEY}, observed_at_ms AS t FROM {inputs.new('watermark')}")
    if "topic_recreated" in inputs.changes:  # the mapping's current life changes from then on
        new = inputs.new("topic_recreated")
        times.append(f"SELECT flow, source_topic, {EACH_PARTITION_SQL}, emitted_at_ms AS t FROM {new}")
    first_new = f"SELECT {_KEY}, min(t) AS first FROM ({' UNION ALL '.join(times)}) GROUP BY {_KEY}"
    con.execute(f"CREATE TEMP TABLE held AS SELECT * FROM {inputs.gold('rpo')} WHERE {where}")
    # Spark's max_by: the value at the latest row, null or not
    con.execute(
        f"""
        CREATE TEMP TABLE scope AS
        SELECT k.{_KEY.replace(", ", ", k.")}, b._t, b._last, b._tmark
        FROM touched k LEFT JOIN (
            SELECT h.{_KEY.replace(", ", ", h.")}, max(h.observed_at_ms) AS _t,
                   arg_max_null(CASE WHEN h.last_replicated_offset IS NOT NULL THEN struct_pack(
                       u := h.last_replicated_offset, ts := h.last_replicated_timestamp_ms) END,
                       h.observed_at_ms) AS _last,
                   arg_max_null(CASE WHEN h.target_log_start_offset IS NOT NULL THEN struct_pack(
                       t := h.observed_at_ms, log_start := h.target_log_start_offset) END,
                       h.observed_at_ms) AS _tmark
            FROM held h JOIN ({first_new}) f ON {_on("h", "f")}
            WHERE h.observed_at_ms < f.first
            GROUP BY ALL
        ) b ON {_on("k", "b")}
        """
    )
    lowest = con.sql("SELECT CASE WHEN count(*) = count(_t) THEN min(_t) END FROM scope").fetchone()
    bound = lowest[0] if lowest is not None else None
    after = "(s._t IS NULL OR x.{col} > s._t)"
    silver_syncs = f"(SELECT * FROM {inputs.silver('offset_sync')} WHERE {where})"
    syncs = f"SELECT x.* FROM {silver_syncs} x JOIN scope s ON {_on('x', 's')}"
    syncs += f" WHERE {after.format(col='emitted_at_ms')}"
    if bound is not None:
        syncs += f" AND x.emitted_at_ms > {int(bound)}"
    if inputs.versions.get("watermark") is not None:
        silver_marks = f"(SELECT * FROM {inputs.silver('watermark')} WHERE {where})"
        marks = f"SELECT x.* FROM {silver_marks} x JOIN scope s ON {_on('x', 's')}"
        marks += f" WHERE {after.format(col='observed_at_ms')}"
        if bound is not None:
            marks += f" AND x.observed_at_ms > {int(bound)}"
    else:
        marks = ""
    con.execute(f"CREATE TEMP TABLE segments AS {inputs.segments(where)}")
    rows = _rows(con, syncs, marks) if marks else None
    earlier = con.sql(
        f"""SELECT h.* EXCLUDE (records_deleted_on_target, records_at_risk), g.first_copy
        FROM held h JOIN scope s ON {_on("h", "s")} JOIN segments g ON {_on("h", "g")}
        WHERE h.observed_at_ms <= s._t AND h.target_log_start_offset > 0 AND g.first_copy < h.target_log_start_offset"""
    ).to_arrow_table()
    if rows is not None and earlier.num_rows:
        earlier = earlier.select(rows.column_names).cast(rows.schema)
    parts = [t for t in (rows, earlier) if t is not None and t.num_rows]
    out = _with_deleted(pa.concat_tables(parts), _Segments(con)) if parts else _empty(inputs)
    scope = con.sql(
        f"SELECT {_KEY}, CASE WHEN _t IS NOT NULL THEN _t + 1 END AS _tail_observed_at_ms FROM scope"
    ).to_arrow_table()
    return DuckTail(out, scope)


def _rows(con: Any, syncs: str, marks: str) -> pa.Table:
    """The source observations after each tail start, with the running maxima and the rules of
    ``lakehouse.tables.rpo.spark.rpo`` (all but the deleted copies, ``_with_deleted``)."""
    return con.sql(
        f"""
        WITH marks AS ({marks}),
        obs AS (SELECT * FROM marks WHERE side = 'source'),
        events AS (
            SELECT {_KEY}, observed_at_ms AS _t, 1 AS _kind, watermark_event_id_ AS _id, NULL AS _p, NULL AS _m
            FROM (SELECT *, event_id AS watermark_event_id_ FROM obs)
            UNION ALL SELECT {_KEY}, emitted_at_ms, 0, NULL, struct_pack(u := upstream_offset,
                ts := upstream_timestamp_ms), NULL FROM ({syncs})
            UNION ALL SELECT {_KEY}, observed_at_ms, 0, NULL, NULL, struct_pack(t := observed_at_ms,
                log_start := log_start_offset) FROM marks WHERE side = 'target'
            UNION ALL SELECT {_KEY}, _t, 0, NULL, _last, _tmark FROM scope WHERE _t IS NOT NULL
        ),
        running AS (
            SELECT _id, max(_p) OVER w AS _last, max(_m) OVER w AS _tmark FROM events
            WINDOW w AS (PARTITION BY {_KEY} ORDER BY _t, _kind ROWS UNBOUNDED PRECEDING)
            QUALIFY _kind = 1
        ),
        joined AS (
            SELECT o.*, r._last, r._tmark, g.first_copy,
                   coalesce(o.read_position, r._last.u + 1, o.log_start_offset) AS _next
            FROM obs o JOIN running r ON r._id = o.event_id
            LEFT JOIN segments g ON {_on("o", "g")}
        )
        SELECT {_KEY}, cluster AS source_cluster, observed_at_ms, log_start_offset, log_end_offset,
               read_position, position_source, _last.u AS last_replicated_offset,
               _last.ts AS last_replicated_timestamp_ms,
               greatest(0, log_end_offset - _next)::BIGINT AS records_behind,
               coalesce(unreplicated_records,
                        greatest(0, log_end_offset - greatest(_next, log_start_offset)))::BIGINT
                   AS records_unreplicated,
               coalesce(greatest(0, log_start_offset - coalesce(read_position, _last.u + 1)), 0)::BIGINT
                   AS records_expired_unreplicated,
               _tmark.log_start AS target_log_start_offset,
               CASE WHEN unreplicated_records IS NOT NULL THEN unreplicated_bytes END::BIGINT AS bytes_unreplicated,
               CASE WHEN coalesce(unreplicated_records,
                                  greatest(0, log_end_offset - greatest(_next, log_start_offset))) = 0 THEN 0.0
                    WHEN unreplicated_records IS NOT NULL OR _last.u IS NOT NULL THEN greatest(0.0,
                        (observed_at_ms - coalesce(oldest_unreplicated_timestamp_ms, _last.ts)) / 1000.0)
               END AS seconds_unreplicated,
               CASE WHEN coalesce(unreplicated_records,
                                  greatest(0, log_end_offset - greatest(_next, log_start_offset))) = 0 THEN 0.0
                    ELSE greatest(0.0, (observed_at_ms - max_timestamp_ms) / 1000.0)
               END AS seconds_unreplicated_min,
               event_id AS watermark_event_id, first_copy
        FROM joined
        """
    ).to_arrow_table()


class _Segments:
    """A touched partition's mapping segments as ``Segment``s, converted once, when first needed."""

    def __init__(self, con: Any) -> None:
        self._con = con
        self._by_key: dict[tuple[Any, ...], list[Segment]] = {}

    def of(self, key: tuple[Any, ...]) -> list[Segment]:
        if key not in self._by_key:
            test = " AND ".join(f"{k} = ?" for k in MAPPING_KEY)
            found = self._con.execute(f"SELECT segs FROM segments WHERE {test}", list(key)).fetchone()
            self._by_key[key] = as_segments(found[0] if found else None)
        return self._by_key[key]


def _with_deleted(rows: pa.Table, segments: _Segments) -> pa.Table:
    """``rows`` with ``records_deleted_on_target`` (``lakehouse.target_deletions.deleted_copies``:
    null without a target log start, 0 where every copy starts at or above it) and ``records_at_risk``."""
    deleted: list[int | None] = []
    columns = [rows[c].to_pylist() for c in (*MAPPING_KEY, "target_log_start_offset", "first_copy")]
    for *key, log_start, first_copy in zip(*columns, strict=True):
        if log_start is None:
            deleted.append(None)
        elif log_start > 0 and first_copy is not None and first_copy < log_start:
            deleted.append(deleted_on_target(segments.of(tuple(key)), log_start).records)
        else:
            deleted.append(0)
    unreplicated = rows["records_unreplicated"].to_pylist()
    at_risk = [None if u is None else u + (d or 0) for u, d in zip(unreplicated, deleted, strict=True)]
    return (
        rows.drop_columns(["first_copy"])
        .append_column("records_deleted_on_target", pa.array(deleted, pa.int64()))
        .append_column("records_at_risk", pa.array(at_risk, pa.int64()))
    )


def _empty(inputs: DuckInputs) -> pa.Table:
    from lakehouse.duck.delta import table_schema

    return table_schema(inputs.paths.gold("rpo")).empty_table()


TWIN = Twin(SPEC, tail=_tail, needs=("offset_sync",))
