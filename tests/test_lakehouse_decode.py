"""Silver decodes exactly what the replicator's own reader decodes, and quarantines with its reasons.

Silver decodes in the JVM (spark-avro) and leaves to fastavro what the JVM cannot vouch for
(``lakehouse.avro_jvm``). Bronze rows are written here directly (no Kafka needed): one event of
every type, a watermark written with the older v1 schema (resolved to v2), and bodies the two
decoders read differently or not at all: truncated, trailing bytes, a string that is not UTF-8,
a boolean byte 2, a length past the end, garbage, an empty body. Every silver row must equal
``replicator.events.decode_record``'s reading, every other row must be quarantined with its
message.
"""

from __future__ import annotations

import io

import fastavro
import pytest

from replicator.errors import EventDecodeError
from replicator.events import decode_record, encode, registry
from replicator.events.codec import HEADER_LEN, MAGIC
from tests import lakehouse_support as ev

pytestmark = pytest.mark.spark


def _v1_watermark() -> bytes:
    v1 = registry().versions("watermark")[0]
    record = ev.watermark(3, 10, 20, 5).to_record()
    record.update(event_type="watermark", schema_version=v1.version)
    buf = io.BytesIO()
    buf.write(MAGIC + v1.fingerprint)
    fastavro.schemaless_writer(buf, v1.parsed, {f["name"]: record[f["name"]] for f in v1.schema["fields"]})
    return buf.getvalue()


def _offset_of(data: bytes, event_type: str, field: str) -> int:
    """Where ``field`` starts in the body of ``data``: the length of the fields before it, encoded."""
    sv = registry().latest(event_type)
    _writer, record = decode_record(data)
    fields = sv.schema["fields"][: [f["name"] for f in sv.schema["fields"]].index(field)]
    prefix = fastavro.parse_schema({"type": "record", "name": "Prefix", "fields": fields})
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, prefix, {f["name"]: record[f["name"]] for f in fields})
    return len(buf.getvalue())


def _records() -> dict[str, bytes]:
    good = {
        "sync": encode(ev.sync(0, 10, 12, 1, "lag_max", (9, 11))),
        "sync_first": encode(ev.sync(1, 0, 0, 1, "first")),
        "checkpoint": encode(ev.checkpoint("g1", 0, 5, 7, 2, "exact")),
        "watermark_v2": encode(ev.watermark(0, 0, 100, 3)),
        "watermark_v1": _v1_watermark(),
        "snapshot": encode(ev.snapshot("source", 4, 3, {"retention.ms": "1000"}, ["User:a|*|READ|ALLOW|LITERAL|t"])),
        "audit": encode(ev.audit("target", 0, 0, 100, 100, 42, 5)),
        "heartbeat": encode(ev.heartbeat(["A", "B"], 6, 7)),
        "failover": encode(ev.failover(8, "g1", [(0, 5, 7)])),
    }
    # each corrupted from an event of its own: silver keeps one row per event id
    sync = encode(ev.sync(0, 10, 12, 1, "lag_max", (9, 11)))
    snapshot = encode(ev.snapshot("target", 4, 3, {"retention.ms": "1000"}, []))
    exists_at = HEADER_LEN + _offset_of(snapshot, "config_snapshot", "exists")  # a boolean, encoded 01
    assert snapshot[exists_at] == 1
    bad = {
        "truncated": sync[:-3],
        "trailing": sync + b"\x00\x07",
        "not_utf8": sync.replace(b"A->B", b"A\xff>B", 1),
        "boolean_two": snapshot[:exists_at] + b"\x02" + snapshot[exists_at + 1 :],
        "length_past_end": sync[:HEADER_LEN] + b"\xfe\xff\xff\xff\x0f" + sync[HEADER_LEN + 3 :],
        "garbage": sync[:HEADER_LEN] + bytes(range(256)),
        "empty_body": sync[:HEADER_LEN],
        "not_an_event": b"this is not an event",
    }
    return {**good, **bad}


def test_silver_and_quarantine_equal_the_replicators_reader(spark, tmp_path):
    from ingest.paths import LakehousePaths
    from lakehouse.silver import update_silver

    records = _records()
    names = sorted(records)
    paths = LakehousePaths(tmp_path / "lake")
    ev.append_bronze(spark, str(paths.bronze), 0, [records[n] for n in names])
    update_silver(spark, paths)
    _assert_the_jvm_vouches_for_every_event_written_by_the_codec(spark, paths, names)

    expected_rows: dict[str, dict[int, dict]] = {}
    expected_reasons: dict[int, str] = {}
    for offset, name in enumerate(names):
        try:
            writer, record = decode_record(records[name])
        except EventDecodeError as exc:
            expected_reasons[offset] = str(exc)
            continue
        expected_rows.setdefault(writer.event_type, {})[offset] = record
    quarantine = spark.read.format("delta").load(str(paths.quarantine)).collect()
    got_reasons = {r.state_offset: r.reason for r in quarantine}
    # the header checks are classify's (no decoder involved): fastavro's message names the same cause
    assert got_reasons.pop(names.index("not_an_event")).startswith("not a mirrorlake event")
    assert "starts with" in expected_reasons.pop(names.index("not_an_event"))
    assert got_reasons == expected_reasons
    assert {names[o] for o in got_reasons} >= {"truncated", "trailing", "not_utf8", "garbage", "empty_body"}
    assert {r.state_offset: r.value for r in quarantine} == {
        o: records[names[o]] for o in [*expected_reasons, names.index("not_an_event")]
    }
    for event_type, by_offset in expected_rows.items():
        silver = spark.read.format("delta").load(str(paths.silver(event_type))).collect()
        got = {
            r.state_offset: {k: v for k, v in r.asDict(recursive=True).items() if k in by_offset[r.state_offset]}
            for r in silver
        }
        assert got == {o: _plain(rec) for o, rec in by_offset.items()}, event_type


def _assert_the_jvm_vouches_for_every_event_written_by_the_codec(spark, paths, names: list[str]) -> None:  # noqa: ANN001
    from lakehouse.decode import classify, decode_events

    classified = classify(spark.read.format("delta").load(str(paths.bronze)))
    vouched = set()
    for event_type in registry().event_types():
        vouched |= {names[r.state_offset] for r in decode_events(classified, event_type).where("vouched").collect()}
    good = {"sync", "sync_first", "checkpoint", "watermark_v2", "watermark_v1", "snapshot", "audit", "heartbeat"}
    assert vouched == good | {"failover"}  # what fastavro is left: the corrupt ones only


def _plain(value):  # noqa: ANN001, ANN202 - fastavro's record: maps as dicts, arrays of records as dicts
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
