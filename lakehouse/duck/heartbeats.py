"""``heartbeat_latency``, ``topology`` and ``failbacks`` in DuckDB for the touched keys: the twins of
``lakehouse.heartbeat_latency``, ``lakehouse.topology`` and ``lakehouse.failbacks``.

Each recomputes its touched keys whole: an origin heartbeat's observations (a few hops), an (origin,
cluster) pair's observations from gold ``heartbeat_latency`` as this build left it, a flow's
failback steps.
"""

from __future__ import annotations

import pyarrow as pa

from lakehouse.duck.delta import table_schema
from lakehouse.duck.engine import DuckInputs, DuckTail, Twin
from lakehouse.heartbeat_latency import HEARTBEAT_KEY
from lakehouse.topology import KEY as TOPOLOGY_KEY

__all__ = ["HEARTBEAT_LATENCY", "TOPOLOGY", "FAILBACKS"]

_OBSERVED = "received_at_ms IS NOT NULL AND len(hop_path) >= 2"


def _in(keys: str, columns: tuple[str, ...]) -> str:
    """SQL: the row's ``columns`` are among the rows of the view ``keys``."""
    cols = ", ".join(columns)
    return f"({cols}) IN (SELECT ({cols}) FROM {keys})"


def _observed_keys(inputs: DuckInputs, columns: str) -> pa.Table:
    """The distinct ``columns`` (SQL) of the new observed heartbeats, also as the view ``touched``."""
    keys = inputs.con.sql(f"SELECT DISTINCT {columns} FROM {inputs.new('heartbeat')} WHERE {_OBSERVED}")
    table = keys.to_arrow_table()
    inputs.con.register("touched", table)
    return table


def _latency(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = _observed_keys(inputs, ", ".join(HEARTBEAT_KEY))
    rows = con.sql(
        f"""
        WITH obs AS (
            SELECT flow, origin_cluster, origin_timestamp_ms, hop_path, array_to_string(hop_path, '->') AS path,
                   hop_path[-1] AS cluster, hop_path[-2] AS previous_cluster, len(hop_path) - 1 AS hops,
                   received_at_ms, received_at_ms - origin_timestamp_ms AS latency_ms, topic, event_id,
                   array_to_string(hop_path[1:len(hop_path) - 1], '->') AS _prefix
            FROM {inputs.silver("heartbeat")} WHERE {_OBSERVED} AND {_in("touched", HEARTBEAT_KEY)}
        ),
        earlier AS (SELECT origin_cluster, origin_timestamp_ms, path, min(latency_ms) AS _prev FROM obs GROUP BY ALL)
        SELECT o.* EXCLUDE (_prefix),
               CASE WHEN o.hops = 1 THEN o.latency_ms ELSE o.latency_ms - e._prev END AS hop_latency_ms
        FROM obs o LEFT JOIN earlier e
          ON e.origin_cluster = o.origin_cluster AND e.origin_timestamp_ms = o.origin_timestamp_ms
         AND e.path = o._prefix
        """
    ).to_arrow_table()
    return DuckTail(rows, keys)


def _topology(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = _observed_keys(inputs, "origin_cluster, hop_path[-1] AS cluster")
    by = ", ".join(TOPOLOGY_KEY)
    rows = con.sql(
        f"""
        WITH l AS (SELECT * FROM {inputs.gold("heartbeat_latency")} WHERE {_in("touched", TOPOLOGY_KEY)}),
        stats AS (SELECT {by}, count(*) AS observations, count(DISTINCT path) AS paths FROM l GROUP BY {by}),
        last AS (
            SELECT {by}, hops, path, received_at_ms AS last_seen_ms, latency_ms AS latest_latency_ms,
                   hop_latency_ms AS latest_hop_latency_ms
            FROM l QUALIFY row_number() OVER (PARTITION BY {by} ORDER BY received_at_ms DESC, event_id DESC) = 1
        )
        SELECT * FROM last JOIN stats USING ({by})
        """
    ).to_arrow_table()
    return DuckTail(rows, keys)


def _failbacks(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = con.sql(f"SELECT DISTINCT flow FROM {inputs.new('failback')}").to_arrow_table()
    if not keys.num_rows:
        return DuckTail(table_schema(inputs.paths.gold("failbacks")).empty_table(), keys)
    con.register("touched", keys)
    rows = con.sql(
        f"""
        SELECT flow, event_id AS failback_event_id, emitted_at_ms AS applied_at_ms, action, source_cluster,
               target_cluster, records::BIGINT AS records, len(ranges) AS ranges,
               coalesce(list_reduce(list_transform(ranges, r -> r.bytes::BIGINT), (a, b) -> a + b, 0::BIGINT), 0)
                   AS bytes,
               array_to_string(groups, ',') AS groups, len(offsets) AS offsets_written, "user", host
        FROM {inputs.silver("failback")} WHERE {_in("touched", ("flow",))}
        """
    ).to_arrow_table()
    return DuckTail(rows, keys)


HEARTBEAT_LATENCY = Twin(
    key=HEARTBEAT_KEY, row_id=(*HEARTBEAT_KEY, "event_id"), tail_order=(), tail=_latency, needs=("heartbeat",)
)
TOPOLOGY = Twin(key=TOPOLOGY_KEY, row_id=TOPOLOGY_KEY, tail_order=(), tail=_topology)
FAILBACKS = Twin(key=("flow",), row_id=("failback_event_id",), tail_order=(), tail=_failbacks, needs=("failback",))
