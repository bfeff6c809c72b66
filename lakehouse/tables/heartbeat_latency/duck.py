"""``heartbeat_latency`` in DuckDB for the touched keys: the twin of ``.spark``. An origin
heartbeat's observations (a few hops) are recomputed whole. ``observed_keys`` serves ``topology``'s
twin too.
"""

from __future__ import annotations

import pyarrow as pa

from lakehouse.duck.engine import DuckInputs, DuckTail, Twin, in_keys
from lakehouse.tables.heartbeat_latency import HEARTBEAT_KEY, SPEC

__all__ = ["TWIN", "OBSERVED", "observed_keys"]

OBSERVED = "received_at_ms IS NOT NULL AND len(hop_path) >= 2"


def observed_keys(inputs: DuckInputs, columns: str) -> pa.Table:
    """The distinct ``columns`` (SQL) of the new observed heartbeats, also as the view ``touched``."""
    keys = inputs.con.sql(f"SELECT DISTINCT {columns} FROM {inputs.new('heartbeat')} WHERE {OBSERVED}")
    table = keys.to_arrow_table()
    inputs.con.register("touched", table)
    return table


def _latency(inputs: DuckInputs) -> DuckTail:
    con = inputs.con
    keys = observed_keys(inputs, ", ".join(HEARTBEAT_KEY))
    rows = con.sql(
        f"""
        WITH obs AS (
            SELECT flow, origin_cluster, origin_timestamp_ms, hop_path, array_to_string(hop_path, '->') AS path,
                   hop_path[-1] AS cluster, hop_path[-2] AS previous_cluster, len(hop_path) - 1 AS hops,
                   received_at_ms, received_at_ms - origin_timestamp_ms AS latency_ms, topic, event_id,
                   array_to_string(hop_path[1:len(hop_path) - 1], '->') AS _prefix
            FROM {inputs.silver("heartbeat")} WHERE {OBSERVED} AND {in_keys("touched", HEARTBEAT_KEY)}
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


TWIN = Twin(SPEC, tail=_latency, needs=("heartbeat",))
