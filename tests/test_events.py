"""Event codec: round trips, clear errors for bad bytes, and the schema evolution rule."""

from __future__ import annotations

import io
import json
from importlib import resources

import fastavro
import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.errors import EventDecodeError
from replicator.events import (
    EVENT_TYPES,
    MAGIC,
    AuditWindow,
    Checkpoint,
    ConfigSnapshot,
    ConsumerRelease,
    Cutover,
    Failback,
    FailbackOffset,
    FailbackRange,
    Failover,
    FailoverOffset,
    GroupSync,
    Heartbeat,
    Lifecycle,
    MetadataChange,
    OffsetSync,
    RecordsLostBeforeCopy,
    SchemaRegistry,
    TopicRecreated,
    Watermark,
    decode,
    encode,
    registry,
)
from replicator.events.codec import load_schema_version

offsets = st.integers(min_value=0, max_value=2**62)


@given(
    u=offsets,
    d=offsets,
    p=st.integers(0, 10_000),
    prev=st.none() | st.tuples(offsets, offsets),
    topic=st.from_regex(r"[A-Za-z0-9._-]{1,40}", fullmatch=True).filter(lambda t: t not in (".", "..")),
)
def test_offset_sync_round_trips(u, d, p, prev, topic):
    event = OffsetSync(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        source_topic=topic,
        target_topic="A." + topic,
        partition=p,
        upstream_offset=u,
        downstream_offset=d,
        upstream_timestamp_ms=123,
        reason="delta_change",
        previous_upstream_offset=prev[0] if prev else None,
        previous_downstream_offset=prev[1] if prev else None,
    )
    data = encode(event)
    assert data[:2] == MAGIC
    assert decode(data) == event


def test_envelope_is_stamped_and_unique():
    a = Lifecycle(flow="A->B", replicator_id="r", state="started")
    b = Lifecycle(flow="A->B", replicator_id="r", state="started")
    assert a.event_id != b.event_id and a.emitted_at_ms > 1_600_000_000_000
    assert decode(encode(a)) == a


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"", "not an Avro single-object"),
        (b"hello world, not avro", "starts with 6865"),
        (MAGIC + bytes(8) + b"\x00", "unknown schema fingerprint 0000000000000000"),
    ],
)
def test_bad_bytes_name_the_problem(data, needle):
    with pytest.raises(EventDecodeError, match=needle):
        decode(data)


def test_truncated_and_padded_bodies_are_rejected():
    data = encode(Lifecycle(flow="A->B", replicator_id="r", state="stopped", reason="done"))
    with pytest.raises(EventDecodeError, match="body does not decode"):
        decode(data[:-3])
    with pytest.raises(EventDecodeError, match="trailing bytes"):
        decode(data + b"\x00")


def test_released_schemas_are_never_edited():
    """A shipped ``<type>.v<N>.avsc`` keeps its fingerprint forever; a change is a new version."""
    root = resources.files("replicator.events") / "schemas"
    lock = json.loads((root / "fingerprints.lock.json").read_text())
    shipped = {
        f"{v.event_type}.v{v.version}": v.fingerprint.hex()
        for t in registry().event_types()
        for v in registry().versions(t)
    }
    for name, fp in lock.items():
        assert shipped.get(name) == fp, f"{name}.avsc was edited after release (or removed)"
    assert set(shipped) == set(lock), "a new schema version must be added to fingerprints.lock.json"


def _sample(avro_type):
    """A value of ``avro_type`` (unions: null)."""
    if isinstance(avro_type, list):
        return None
    if isinstance(avro_type, dict):
        return {"array": [], "map": {}}[avro_type["type"]]
    return {"string": "s", "int": 1, "long": 2, "boolean": True}[avro_type]


def _compatible(old, new) -> bool:
    """Can a reader with ``new`` read data written with ``old``? (fastavro's schema resolution)"""
    record = {f["name"]: _sample(f["type"]) for f in old.schema["fields"]}
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, old.parsed, record)
    buf.seek(0)
    try:
        fastavro.schemaless_reader(buf, old.parsed, new.parsed)
    except fastavro.read.SchemaResolutionError:
        return False
    return True


def test_newest_schema_of_each_type_reads_every_older_version():
    reg = registry()
    for event_type in reg.event_types():
        versions = reg.versions(event_type)
        assert [v.version for v in versions] == list(range(1, len(versions) + 1)), event_type
        for old in versions:
            assert _compatible(old, versions[-1]), f"{event_type} v{old.version} unreadable by the newest"


def test_the_compatibility_check_catches_a_breaking_change():
    old = registry().latest("lifecycle")
    doc = json.loads(json.dumps(old.schema))
    doc["fields"].append({"name": "required_without_default", "type": "string"})
    broken = load_schema_version(f"lifecycle.v{old.version + 1}.avsc", json.dumps(doc))
    assert not _compatible(old, broken)
    doc["fields"][-1] = {"name": "optional", "type": ["null", "string"], "default": None}
    fine = load_schema_version(f"lifecycle.v{old.version + 1}.avsc", json.dumps(doc))
    assert _compatible(old, fine)
    # and an event written with the old version decodes under the new one, defaults filled in
    reg = SchemaRegistry([old, fine])
    event = Lifecycle(flow="A->B", replicator_id="r", state="started")
    assert decode(encode(event), reg) == event


SAMPLES = [
    Checkpoint(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        group="g",
        source_topic="t",
        target_topic="A.t",
        partition=2,
        upstream_offset=10,
        downstream_offset=12,
        method="exact",
        error_bound=0,
    ),
    GroupSync(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        group="g",
        source_topic="t",
        target_topic="A.t",
        partition=0,
        decision="skipped_rewind",
        translated_offset=3,
        target_offset_before=9,
    ),
    Heartbeat(flow="B->C", replicator_id="r", origin_cluster="A", hop_path=("A", "B", "C"), origin_timestamp_ms=1),
    Watermark(
        flow="A->B",
        replicator_id="r",
        cluster="B",
        side="target",
        topic="A.t",
        source_topic="t",
        partition=0,
        log_start_offset=0,
        log_end_offset=5,
        observed_at_ms=7,
        max_timestamp_ms=6,
    ),
    Watermark(
        flow="A->B",
        replicator_id="r",
        cluster="A",
        side="source",
        topic="t",
        source_topic="t",
        partition=0,
        log_start_offset=0,
        log_end_offset=9,
        observed_at_ms=7,
        read_position=6,
        position_source="flow",
        unreplicated_records=2,
        unreplicated_bytes=40,
        oldest_unreplicated_timestamp_ms=5,
    ),
    ConfigSnapshot(
        flow="A->B",
        replicator_id="r",
        cluster="A",
        side="source",
        topic="t",
        source_topic="t",
        exists=True,
        partitions=3,
        configs={"retention.ms": "604800000"},
        config_sources={"retention.ms": "DEFAULT_CONFIG"},
        acls=("User:x|*|READ|ALLOW|LITERAL|t",),
        digest="abc",
        reason="initial",
    ),
    AuditWindow(
        flow="A->B",
        replicator_id="r",
        side="target",
        cluster="B",
        source_topic="t",
        target_topic="A.t",
        partition=0,
        window_start=0,
        window_end=1000,
        record_count=998,
        checksum=-(2**63),
        extra_copies=4,
    ),
    Failover(
        flow="A->B",
        replicator_id="failover-cli",
        source_cluster="A",
        target_cluster="B",
        mode="unplanned",
        groups=("g",),
        offsets=(FailoverOffset("g", "t", "A.t", 0, 10, 12, 0, 0, 3),),
        records_lost=0,
        records_reread=0,
        records_unreplicated=3,
        seconds_unreplicated=1.5,
        host="h",
        user="u",
    ),
    Failback(
        flow="A->B",
        replicator_id="failback-cli",
        source_cluster="A",
        target_cluster="B",
        action="recover",
        ranges=(FailbackRange("t", "A.t", 0, 10, 13, 3, 30, 100, 103),),
        groups=("g",),
        offsets=(FailbackOffset("g", "t", 0, 12, 10, "exact"),),
        records=3,
        host="h",
        user="u",
    ),
    TopicRecreated(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        side="source",
        topic="acct",
        source_topic="acct",
        previous_topic_id="old-id",
        topic_id="new-id",
        partitions=2,
        log_start_offsets=(0, 0),
        log_end_offsets=(10, 12),
        policy="continue",
        noticed="start",
    ),
    RecordsLostBeforeCopy(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        source_topic="acct",
        partition=1,
        from_offset=300,
        to_offset=1000,
        records=700,
        noticed="running",
    ),
    MetadataChange(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        kind="acl",
        action="deleted",
        topic="A.acct",
        source_topic="acct",
        acl="LITERAL|User:alice|*|READ|ALLOW",
        source_acl="LITERAL|User:alice|*|ALL|ALLOW",
        reason="the source binding is gone",
    ),
    ConsumerRelease(
        flow="A->B",
        replicator_id="failover@h-1",
        source_cluster="A",
        target_cluster="B",
        cluster="A",
        groups=("billing", "audit"),
        reason="failover",
        host="h",
        user="u",
    ),
    Cutover(
        flow="A->B",
        replicator_id="cutover@h-1",
        source_cluster="A",
        target_cluster="B",
        step="fenced",
        topics=("orders", "acct"),
        acls=("TOPIC|LITERAL|orders|User:*|*|WRITE|DENY",),
        host="h",
        user="u",
    ),
]


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: e.event_type)
def test_every_event_type_round_trips(event):
    assert decode(encode(event)) == event
    assert set(EVENT_TYPES) == set(registry().event_types())
