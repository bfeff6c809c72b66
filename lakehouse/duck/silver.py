"""Silver increments without Spark: bronze's new rows decoded with fastavro and appended by delta-rs.

``lakehouse serve`` refreshes every few seconds, and Spark's silver step (a stream, its batch jobs,
a MERGE per type) took 24-26 s of each refresh (``bench/freshness.py``): the floor of how fresh the
lakehouse could be. An increment is small, so here it is read from bronze's change feed
(delta-rs, the rows added after the version silver reached, ``lakehouse.silver_progress``), each
record decoded by the replicator's own reader (``replicator.events.decode_record``: writer schema
resolved to the newest, validity rules applied; ``lakehouse.duck.silver_decode``, in worker
processes for a large increment when a ``DecodePool`` is given), and appended to its silver table,
or to quarantine with its reason, by delta-rs.

Contract: the rows Spark's silver writes (``lakehouse.silver``), held equal by
``tests/test_silver_engines.py``: per event type one row per event id (an id silver already holds
is skipped, as Spark's MERGE inserts only absent ones; within the increment the first copy in
state-topic order is kept), the event's columns and where it sits in the state topic; a record
that is not an event, does not decode or breaks a validity rule goes to quarantine with the same
words. Each table is one commit; the progress is written after the last, so a crash in between
only reads the same rows again next time, and they are skipped.

``update_silver_increment`` returns None, with nothing written, when Spark should do it: a silver
Spark wrote before the progress was recorded (its stream checkpoint says how far), more new rows
than an in-memory increment holds, a quarantine table gone, a silver table that lacks a column of
its newest schema (Spark evolves tables). A new lakehouse gets its quarantine here, and a type seen
for the first time its table, the ones Spark would make (``lakehouse.duck.arrow_types``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from ingest.paths import LakehousePaths
from lakehouse.duck import delta
from lakehouse.duck.arrow_types import QUARANTINE_ARROW_SCHEMA, silver_arrow_schema
from lakehouse.duck.silver_decode import DecodePool, decode_rows
from lakehouse.silver_progress import SilverProgress, read_progress, write_progress
from lakehouse.silver_rows import LINEAGE_COLUMNS, event_columns
from lakehouse.store_access import reach_from_duckdb

__all__ = ["SilverIncrement", "update_silver_increment"]

_log = logging.getLogger(__name__)
MOST_NEW_ROWS = 2_000_000  # bronze rows an increment holds in memory (as the gold twins' bound)


@dataclass(frozen=True)
class SilverIncrement:
    """What one increment did: bronze versions ``(after, upto]`` read, rows per silver table appended."""

    after: int
    upto: int
    bronze_rows: int
    appended: dict[str, int] = field(default_factory=dict)
    quarantined: int = 0
    seconds: float = 0.0


def update_silver_increment(
    paths: LakehousePaths,
    *,
    most: int = MOST_NEW_ROWS,
    on_stage: Callable[[str], None] | None = None,
    decoder: DecodePool | None = None,
) -> SilverIncrement | None:
    """Bring silver up to bronze's latest version without Spark; None (nothing written) where Spark
    should. ``on_stage`` hears each step's name as it starts (``bench.freshness`` times them);
    ``decoder``'s workers decode a large increment side by side (else this process does)."""
    stage = on_stage or (lambda _name: None)
    started = time.monotonic()
    stage("silver: read bronze's new rows")
    progress = read_progress(paths)
    fresh = progress is None
    quarantine = delta.existing_table(paths.quarantine)
    if fresh and quarantine is not None:  # Spark's first batch makes quarantine
        _log.info("silver: Spark's silver ran before silver's progress was recorded; Spark decodes")
        return None
    after = progress.bronze_version if progress is not None else -1
    try:
        upto = delta.version(paths.bronze)
        if upto <= after:
            return SilverIncrement(after, after, 0)
        rows = delta.inserted(paths.bronze, None if fresh else after, upto, most)
    except delta.TooManyRows as exc:
        _log.info("silver: %s, more than an increment held in memory; Spark decodes", exc)
        return None
    except DeltaError as exc:
        _log.info("silver: delta-rs cannot read bronze's change feed (%s); Spark decodes", exc)
        return None
    stage("silver: decode")
    decoded = decoder.decode(rows) if decoder is not None else decode_rows(rows)
    if quarantine is None and not fresh:
        _log.info("silver: the quarantine table is gone; Spark decodes (and makes it)")
        return None
    tables = {t: table for t in decoded.events if (table := delta.existing_table(paths.silver(t))) is not None}
    if (why := _unwritable(tables)) is not None:
        _log.info("silver: %s; Spark decodes", why)
        return None
    if quarantine is None:  # a new lakehouse: Spark's first batch makes it, empty or not
        quarantine = delta.create_table(paths.quarantine, QUARANTINE_ARROW_SCHEMA)
    for event_type in decoded.events.keys() - tables.keys():  # its first events: its table, as Spark makes it
        _log.info("silver: creating the table of %s", event_type)
        schema = silver_arrow_schema(event_type)
        tables[event_type] = delta.create_table(paths.silver(event_type), schema, change_feed=True)
    stage("silver: append")
    con = duckdb.connect()
    reach_from_duckdb(con, paths.root)
    try:
        appended = {t: _append_new(con, tables[t], _first_copies(rows_)) for t, rows_ in decoded.events.items()}
        quarantined = _append_rejected(con, quarantine, decoded.rejected)
    finally:
        con.close()
    write_progress(paths, SilverProgress(upto, None))
    return SilverIncrement(after, upto, rows.num_rows, appended, quarantined, time.monotonic() - started)


def _unwritable(tables: dict[str, DeltaTable]) -> str | None:
    """Why a silver table cannot take its rows here (None: all can)."""
    for event_type, table in tables.items():
        held = set(delta.table_schema(table).names)
        missing = [c for c in event_columns(event_type) if c not in held]
        if missing:
            return f"silver table {event_type} lacks {', '.join(missing)} (its schema evolved)"
    return None


def _first_copies(batch: pa.Table) -> pa.Table:
    """One row per event id, the first in state-topic order (a replayed topic repeats events)."""
    if pc.count_distinct(batch["event_id"], mode="all").as_py() == batch.num_rows:
        return batch  # the usual increment: nothing repeated, no order to find
    order = pc.sort_indices(batch, sort_keys=[(c, "ascending") for c in LINEAGE_COLUMNS]).to_pylist()
    ids = batch["event_id"].to_pylist()
    seen: set[str] = set()
    keep = []
    for i in order:
        if ids[i] not in seen:
            seen.add(ids[i])
            keep.append(i)
    return batch.take(keep)


def _conformed(batch: pa.Table, schema: pa.Schema) -> pa.Table:
    """``batch`` with the table's columns, in its order and types (a column the events lack: nulls)."""
    return pa.table(
        [
            batch[f.name].cast(f.type) if f.name in batch.column_names else pa.nulls(batch.num_rows, f.type)
            for f in schema
        ],
        schema=schema,
    )


def _append_new(con: duckdb.DuckDBPyConnection, table: DeltaTable, rows: pa.Table) -> int:
    """Append the ``rows`` whose event id the table lacks, ordered by emission time (each file then
    holds a stretch of time, which the file statistics let later reads skip); how many.

    The ids are looked up among the rows emitted within the increment's time span only, in the
    files whose statistics allow it (a replayed event keeps its emission time)."""
    schema = delta.table_schema(table)
    batch = _conformed(rows, schema)
    times = batch["emitted_at_ms"] if "emitted_at_ms" in schema.names else None
    if times is not None and times.null_count == 0 and len(times):
        low, high = pc.min(times).as_py(), pc.max(times).as_py()
        delta.register(con, "held", table, within=("emitted_at_ms", low, high))
        window = f"emitted_at_ms BETWEEN {low} AND {high} AND "
    else:
        delta.register(con, "held", table)
        window = ""
    con.register("batch", batch.select(["event_id"]))
    try:
        found = con.execute(f"SELECT event_id FROM held WHERE {window}event_id IN (SELECT event_id FROM batch)")
        present = pa.array([r[0] for r in found.fetchall()], pa.string())
    finally:
        con.unregister("batch")
    new = batch.filter(pc.invert(pc.is_in(batch["event_id"], value_set=present))) if len(present) else batch
    if new.num_rows:
        if times is not None:
            new = new.sort_by([("emitted_at_ms", "ascending", "at_end")])
        delta.append(table, new)
    return new.num_rows


def _append_rejected(con: duckdb.DuckDBPyConnection, table: DeltaTable, rows: Iterable[dict[str, Any]]) -> int:
    """Append to quarantine the rejected rows whose state-topic coordinates it lacks; how many."""
    rows = list(rows)
    if not rows:
        return 0
    schema = delta.table_schema(table)
    now = pa.scalar(time.time_ns() // 1000, pa.timestamp("us", tz="UTC"))
    batch = pa.Table.from_pylist([{**r, "quarantined_at": now.as_py()} for r in rows], schema=schema)
    delta.register(con, "held", table)
    con.register("batch", batch.select(list(LINEAGE_COLUMNS)))
    try:
        key = ", ".join(LINEAGE_COLUMNS)
        found = con.execute(f"SELECT {key} FROM held SEMI JOIN batch USING ({key})")
        present = set(found.fetchall())
    finally:
        con.unregister("batch")
    keep = [i for i, r in enumerate(rows) if tuple(r[c] for c in LINEAGE_COLUMNS) not in present]
    if keep:
        delta.append(table, batch.take(keep))
    return len(keep)
