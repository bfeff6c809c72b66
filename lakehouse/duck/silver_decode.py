"""Bronze rows decoded into silver's Arrow rows, side by side in worker processes when there are many.

Each state event is decoded in Python (fastavro and the validity rules, about 8 us) and its record
then copied into Arrow (about 4 us more): at 10,000 events/s that was the largest part of a ``lakehouse
serve`` refresh, on one core while the other waited (``bench/freshness.py``, py-spy). A
``DecodePool`` cuts an increment's rows into one slice per worker process and each worker returns
its slice decoded: Arrow tables per event type and the rejected rows with their reason. Slices go
back together in bronze order, so the result is the one a single ``decode_rows`` call gives.

Contract (``lakehouse.duck.silver`` appends what this returns): per event type the records of the
rows that decode, in bronze order, as columns of ``silver_arrow_schema`` (the event's fields under
its newest schema, then where it sits in the state topic); per rejected row its state-topic
coordinates, its bytes and the reason, in the words Spark's silver uses.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import ModuleType, TracebackType
from typing import Any

import pyarrow as pa

from lakehouse.duck.arrow_types import silver_arrow_schema
from lakehouse.silver_rows import LINEAGE_COLUMNS, NOT_AN_EVENT
from replicator.errors import EventDecodeError
from replicator.events import SchemaRegistry, decode_record, registry
from replicator.events.codec import header_fingerprint

__all__ = ["Decoded", "DecodePool", "decode_rows"]

_log = logging.getLogger(__name__)
# fewer rows than this are decoded in the calling process: a slice's trip to a worker and back
# (pickled Arrow) costs milliseconds, a worker's decoding of a few thousand rows about as much
_FEWEST_FOR_WORKERS = 8_000
_PARENT_CHECK_S = 1.0


@dataclass
class Decoded:
    """Bronze rows as silver rows: per event type an Arrow table (``silver_arrow_schema``), and the
    rows for quarantine (their coordinates, ``value`` and ``reason``)."""

    events: dict[str, pa.Table] = field(default_factory=dict)
    rejected: list[dict[str, Any]] = field(default_factory=list)


def decode_rows(rows: pa.Table, reg: SchemaRegistry | None = None) -> Decoded:
    """Each bronze row (``cluster``, ``topic``, ``partition``, ``offset``, ``value``) decoded, in order."""
    reg = reg or registry()
    records: dict[str, list[dict[str, Any]]] = {}
    rejected: list[dict[str, Any]] = []
    columns = [rows.column(c).to_pylist() for c in ("cluster", "topic", "partition", "offset", "value")]
    cluster_, topic_, partition_, offset_ = LINEAGE_COLUMNS
    for cluster, topic, partition, offset, value in zip(*columns, strict=True):
        try:
            writer, record = decode_record(value, reg)
        except EventDecodeError as exc:  # a body that does not parse, or a rule it breaks (same words as Spark's)
            fp = header_fingerprint(value)
            reason = NOT_AN_EVENT if fp is None or reg.by_fingerprint(fp) is None else str(exc)
            lineage = dict(zip(LINEAGE_COLUMNS, (cluster, topic, partition, offset), strict=True))
            rejected.append({**lineage, "value": value, "reason": reason})
            continue
        # the record is decode_record's own new dict: where it came from goes in place (a copy per
        # event was a tenth of the decode)
        record[cluster_], record[topic_], record[partition_], record[offset_] = cluster, topic, partition, offset
        records.setdefault(writer.event_type, []).append(record)
    events = {t: pa.Table.from_pylist(rs, schema=silver_arrow_schema(t, reg)) for t, rs in records.items()}
    return Decoded(events, rejected)


def _joined(parts: list[Decoded]) -> Decoded:
    """Slices decoded apart, back together in their order."""
    out = Decoded()
    for event_type in dict.fromkeys(t for part in parts for t in part.events):
        out.events[event_type] = pa.concat_tables([p.events[event_type] for p in parts if event_type in p.events])
    out.rejected = [row for part in parts for row in part.rejected]
    return out


def _worker_start() -> None:
    """A worker's start: signals are its parent's to act on (a Ctrl-C reaches the whole process group,
    and serve finishes its refresh first); it ends when its parent is gone; the schema registry is
    loaded before an increment waits on it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    parent = os.getppid()
    threading.Thread(target=_end_with, args=(parent,), name="end-with-parent", daemon=True).start()
    registry()


def _end_with(parent: int) -> None:
    """Exit once the process that started this one is gone (killed: a worker holds both ends of its
    task pipe, so it would wait for tasks forever)."""
    while os.getppid() == parent:
        time.sleep(_PARENT_CHECK_S)
    os._exit(0)


def _started() -> None:
    """A no-op task: submitted once per worker so that they all start with the pool."""


@contextmanager
def _main_hidden() -> Iterator[None]:
    """A spawned process imports its parent's ``__main__`` again (by module name or file path) before
    it runs anything, so that functions defined there unpickle: an application that uses the
    lakehouse from a script without a ``__main__`` guard would run its script again in every worker
    (a Streamlit AppTest pointed ``__main__`` at its script and the workers died on its ``NameError``:
    issue 60). The workers run only this module's functions: while they start, ``__main__`` is a bare
    module with neither name nor file, and multiprocessing imports nothing for it."""
    main = sys.modules.get("__main__")
    sys.modules["__main__"] = ModuleType("__main__")
    try:
        yield
    finally:
        if main is not None:
            sys.modules["__main__"] = main


class DecodePool:
    """Worker processes that decode large increments side by side (``decode``); ``close`` (or the
    ``with`` block's end) stops them. ``workers`` <= 1 decodes in the calling process only.

    Workers are spawned, not forked: the serving process holds a JVM and librdkafka threads. They
    never run the caller's ``__main__`` (``_main_hidden``). They ignore SIGINT and SIGTERM (the parent
    stops them) and exit within a second of their parent's end, also when it was killed."""

    def __init__(self, workers: int | None = None) -> None:
        self._workers = workers if workers is not None else min(4, os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None
        if self._workers > 1:
            with _main_hidden():  # every worker starts here: one startup task each, none idle yet
                self._pool = ProcessPoolExecutor(
                    self._workers, mp_context=multiprocessing.get_context("spawn"), initializer=_worker_start
                )
                for _ in range(self._workers):
                    self._pool.submit(_started)

    def decode(self, rows: pa.Table) -> Decoded:
        """``decode_rows(rows)``, in slices on the workers when there are enough rows."""
        if self._pool is None or rows.num_rows < _FEWEST_FOR_WORKERS:
            return decode_rows(rows)
        rows = rows.select(["cluster", "topic", "partition", "offset", "value"])
        size = -(-rows.num_rows // self._workers)
        # copies (``take``): a pickled slice would carry its whole table's buffers
        slices = [rows.take(pa.array(range(at, min(at + size, rows.num_rows)))) for at in range(0, rows.num_rows, size)]
        return _joined(list(self._pool.map(decode_rows, slices)))

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> DecodePool:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
