"""MM2's internal records: the Struct decoder against an encoder written here from Kafka's schemas,
and what each record becomes as a mirrorlake event (pure, no Kafka)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from replicator.client.mapping_index import MappingIndex
from replicator.client.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, policy_from_config
from replicator.config import PolicyConfig
from replicator.errors import EventDecodeError
from replicator.events import Checkpoint, Heartbeat, OffsetSync, encode
from replicator.mm2.events import Mm2EventMapper, Mm2Record, mm2_checkpoint, mm2_event_id, mm2_hop_path
from replicator.mm2.records import (
    Mm2Checkpoint,
    Mm2Heartbeat,
    Mm2OffsetSync,
    Mm2RecordError,
    decode_checkpoint,
    decode_heartbeat,
    decode_offset_sync,
    encode_checkpoint,
    encode_heartbeat,
    encode_offset_sync,
)

# -- an encoder, written from Kafka's OffsetSync/Checkpoint/Heartbeat schemas ---------------------


def enc_string(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack(">h", len(raw)) + raw


def enc_offset_sync(s: Mm2OffsetSync) -> tuple[bytes, bytes]:
    return enc_string(s.topic) + struct.pack(">i", s.partition), struct.pack(
        ">qq", s.upstream_offset, s.downstream_offset
    )


def enc_checkpoint(c: Mm2Checkpoint, version: int = 0) -> tuple[bytes, bytes]:
    key = enc_string(c.group) + enc_string(c.topic) + struct.pack(">i", c.partition)
    value = struct.pack(">hqq", version, c.upstream_offset, c.downstream_offset) + enc_string(c.metadata)
    return key, value


def enc_heartbeat(h: Mm2Heartbeat, version: int = 0) -> tuple[bytes, bytes]:
    return enc_string(h.source_alias) + enc_string(h.target_alias), struct.pack(">hq", version, h.timestamp_ms)


names = st.text(max_size=60).filter(lambda s: len(s.encode()) < 32768)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(st.builds(Mm2OffsetSync, names, int32, int64, int64))
def test_offset_sync_round_trips(sync):
    assert decode_offset_sync(*enc_offset_sync(sync)) == sync


@given(st.builds(Mm2Checkpoint, names, names, int32, int64, int64, names))
def test_checkpoint_round_trips(cp):
    assert decode_checkpoint(*enc_checkpoint(cp)) == cp


@given(st.builds(Mm2Heartbeat, names, names, int64))
def test_heartbeat_round_trips(beat):
    assert decode_heartbeat(*enc_heartbeat(beat)) == beat


@given(st.builds(Mm2OffsetSync, names, int32, int64, int64))
def test_offset_sync_encoder_writes_kafkas_bytes(sync):
    assert encode_offset_sync(sync) == enc_offset_sync(sync)
    assert decode_offset_sync(*encode_offset_sync(sync)) == sync


@given(st.builds(Mm2Checkpoint, names, names, int32, int64, int64, names))
def test_checkpoint_encoder_writes_kafkas_bytes(cp):
    assert encode_checkpoint(cp) == enc_checkpoint(cp)
    assert decode_checkpoint(*encode_checkpoint(cp)) == cp


@given(st.builds(Mm2Heartbeat, names, names, int64))
def test_heartbeat_encoder_writes_kafkas_bytes(beat):
    assert encode_heartbeat(beat) == enc_heartbeat(beat)
    assert decode_heartbeat(*encode_heartbeat(beat)) == beat


def test_encoders_write_the_known_bytes_and_refuse_strings_kafka_cannot_hold():
    key = bytes.fromhex("0002" + "6731" + "0003" + "412e74" + "00000002")
    value = bytes.fromhex("0000" + "000000000000000a" + "0000000000000007" + "0001" + "6d")
    assert encode_checkpoint(Mm2Checkpoint("g1", "A.t", 2, 10, 7, "m")) == (key, value)
    assert encode_heartbeat(Mm2Heartbeat("A", "B", 9)) == (
        bytes.fromhex("0001" + "41" + "0001" + "42"),
        bytes(2) + bytes(7) + b"\x09",
    )
    with pytest.raises(Mm2RecordError, match="Checkpoint value: field 'metadata' is 32768 UTF-8 bytes"):
        encode_checkpoint(Mm2Checkpoint("g", "t", 0, 0, 0, "x" * 32768))


def test_known_bytes_decode_as_kafka_writes_them():
    # Checkpoint("g1", TopicPartition("A.t", 2), 10, 7, "m") as Kafka's Checkpoint.recordKey/recordValue
    key = bytes.fromhex("0002" + "6731" + "0003" + "412e74" + "00000002")
    value = bytes.fromhex("0000" + "000000000000000a" + "0000000000000007" + "0001" + "6d")
    assert decode_checkpoint(key, value) == Mm2Checkpoint("g1", "A.t", 2, 10, 7, "m")
    assert decode_offset_sync(bytes.fromhex("0001" + "74" + "00000000"), bytes(7) + b"\x05" + bytes(7) + b"\x06") == (
        Mm2OffsetSync("t", 0, 5, 6)
    )
    assert decode_heartbeat(bytes.fromhex("0001" + "41" + "0001" + "42"), bytes(2) + bytes(7) + b"\x09") == (
        Mm2Heartbeat("A", "B", 9)
    )


def test_bytes_after_the_last_field_are_ignored_as_kafka_does():
    key, value = enc_offset_sync(Mm2OffsetSync("t", 1, 2, 3))
    assert decode_offset_sync(key + b"xx", value + b"yy") == Mm2OffsetSync("t", 1, 2, 3)


@pytest.mark.parametrize(
    ("decoder", "key", "value", "message"),
    [
        (decode_offset_sync, enc_string("t") + bytes(4), bytes(15), "'offset' needs 8 bytes"),
        (decode_offset_sync, b"\x00\x05ab", bytes(16), "'topic' needs 5 bytes"),
        (decode_offset_sync, b"\xff\xff" + bytes(4), bytes(16), "negative string length -1"),
        (decode_offset_sync, None, bytes(16), "OffsetSync key is missing"),
        (decode_checkpoint, enc_string("g") + enc_string("t") + bytes(4), None, "Checkpoint value is missing"),
        (decode_checkpoint, b"", struct.pack(">hqq", 1, 0, 0) + enc_string(""), "unsupported version 1"),
        (
            decode_checkpoint,
            enc_string("g") + b"\x00\x02\xff\xfe" + bytes(4),
            *enc_checkpoint(Mm2Checkpoint("g", "t", 0, 0, 0, ""))[1:],
            "not valid UTF-8",
        ),
        (decode_heartbeat, enc_string("A") + enc_string("B"), b"\x00", "'version' needs 2 bytes"),
        (decode_heartbeat, enc_string("A"), struct.pack(">hq", 0, 1), "'targetClusterAlias' needs 2 bytes"),
    ],
)
def test_malformed_records_raise_a_decode_error_naming_the_part(decoder, key, value, message):
    with pytest.raises(Mm2RecordError, match=message) as info:
        decoder(key, value)
    assert isinstance(info.value, EventDecodeError)


@given(st.binary(max_size=40), st.binary(max_size=40))
def test_arbitrary_bytes_decode_or_raise_only_the_decode_error(key, value):
    for decoder in (decode_offset_sync, decode_checkpoint, decode_heartbeat):
        with contextlib.suppress(Mm2RecordError):
            decoder(key, value)


# -- records as events ---------------------------------------------------------------------------


def _rec(cluster, topic, key, value, offset=0, ts=1000, log_append=False):
    return Mm2Record(cluster, topic, 0, offset, key, value, ts, log_append)


def test_each_flow_owns_its_mm2_topics_on_the_right_cluster():
    m = Mm2EventMapper(DefaultReplicationPolicy(), "A", "B")
    assert m.kind("A", "mm2-offset-syncs.B.internal") == "offset_sync"  # location=source (default)
    assert m.kind("B", "mm2-offset-syncs.A.internal") == "offset_sync"  # location=target
    assert m.kind("B", "mm2-offset-syncs.B.internal") is None
    assert m.kind("B", "A.checkpoints.internal") == "checkpoint"
    assert m.kind("A", "A.checkpoints.internal") is None
    assert m.kind("B", "heartbeats") == m.kind("B", "A.heartbeats") == m.kind("B", "C.A.heartbeats") == "heartbeat"
    assert m.kind("A", "heartbeats") is None
    assert m.kind("B", "orders") is None


def test_records_become_events_with_deterministic_ids():
    m = Mm2EventMapper(DefaultReplicationPolicy(), "A", "B")
    sync = m.to_event(
        "offset_sync",
        _rec("A", "mm2-offset-syncs.B.internal", *enc_offset_sync(Mm2OffsetSync("orders", 3, 100, 98)), offset=7),
    )
    assert isinstance(sync, OffsetSync)
    assert (sync.flow, sync.replicator_id, sync.reason) == ("A->B", "mm2-import", "mm2")
    assert (sync.source_topic, sync.target_topic, sync.partition) == ("orders", "A.orders", 3)
    assert (sync.upstream_offset, sync.downstream_offset, sync.previous_upstream_offset) == (100, 98, None)
    assert sync.upstream_timestamp_ms == 1000
    assert sync.event_id == mm2_event_id("A", "mm2-offset-syncs.B.internal", 0, 7)
    again = m.to_event(
        "offset_sync",
        _rec("A", "mm2-offset-syncs.B.internal", *enc_offset_sync(Mm2OffsetSync("orders", 3, 100, 98)), offset=7),
    )
    assert again is not None and again.event_id == sync.event_id

    cp = m.to_event(
        "checkpoint",
        _rec("B", "A.checkpoints.internal", *enc_checkpoint(Mm2Checkpoint("g", "A.orders", 1, 50, 48, "meta"))),
    )
    assert isinstance(cp, Checkpoint)
    assert (cp.group, cp.source_topic, cp.target_topic, cp.partition) == ("g", "orders", "A.orders", 1)
    assert (cp.upstream_offset, cp.downstream_offset, cp.method, cp.error_bound, cp.metadata) == (
        50,
        48,
        "mm2",
        None,
        "meta",
    )
    back = m.to_event(
        "checkpoint",
        _rec("B", "A.checkpoints.internal", *enc_checkpoint(Mm2Checkpoint("g", "orders", 0, 5, 5, "")), offset=1),
    )
    assert isinstance(back, Checkpoint) and back.source_topic == "B.orders"  # came from B: renamed back
    identity = Mm2EventMapper(IdentityReplicationPolicy(), "A", "B")
    same = identity.to_event(
        "checkpoint", _rec("B", "A.checkpoints.internal", *enc_checkpoint(Mm2Checkpoint("g", "orders", 0, 5, 5, "")))
    )
    assert isinstance(same, Checkpoint) and same.source_topic == same.target_topic == "orders"
    assert len({sync.event_id, cp.event_id, back.event_id}) == 3


@pytest.mark.parametrize(("source_topic", "target_topic"), [("orders", "A.orders"), ("B.orders", "orders")])
def test_a_checkpoint_written_as_mm2s_record_reads_back_as_the_same_checkpoint(source_topic, target_topic):
    ours = Checkpoint(
        flow="A->B",
        replicator_id="r",
        source_cluster="A",
        target_cluster="B",
        group="g",
        source_topic=source_topic,
        target_topic=target_topic,
        partition=3,
        upstream_offset=120,
        downstream_offset=117,
        method="exact",
        error_bound=0,
        metadata=None,
    )
    record = _rec("B", "A.checkpoints.internal", *encode_checkpoint(mm2_checkpoint(ours)))
    back = Mm2EventMapper(DefaultReplicationPolicy(), "A", "B").to_event("checkpoint", record)
    assert isinstance(back, Checkpoint)
    fields = ("group", "source_topic", "target_topic", "partition", "upstream_offset", "downstream_offset")
    assert [getattr(back, f) for f in fields] == [getattr(ours, f) for f in fields]
    assert back.metadata == ""  # MM2's metadata is never null


def test_heartbeats_carry_their_hop_path_and_belong_to_the_flow_of_their_last_hop():
    policy = DefaultReplicationPolicy()
    assert mm2_hop_path(policy, "heartbeats", "A", "B", "B") == ("A", "B")
    assert mm2_hop_path(policy, "A.heartbeats", "B", "A", "B") == ("B", "A", "B")
    assert mm2_hop_path(policy, "C.A.heartbeats", "X", "A", "B") == ("X", "A", "C", "B")
    assert mm2_hop_path(IdentityReplicationPolicy(), "heartbeats", "A", "C", "B") == ("A", "C", "B")
    m = Mm2EventMapper(policy, "A", "B")
    direct = m.to_event("heartbeat", _rec("B", "heartbeats", *enc_heartbeat(Mm2Heartbeat("A", "B", 5)), ts=6))
    assert isinstance(direct, Heartbeat)
    assert (direct.origin_cluster, direct.hop_path, direct.origin_timestamp_ms) == ("A", ("A", "B"), 5)
    assert direct.received_at_ms is None  # CreateTime: MM2's own timestamp, not an arrival time
    assert direct.topic == "heartbeats"
    back = m.to_event(
        "heartbeat", _rec("B", "A.heartbeats", *enc_heartbeat(Mm2Heartbeat("B", "A", 5)), ts=9, log_append=True)
    )
    assert isinstance(back, Heartbeat) and back.hop_path == ("B", "A", "B") and back.received_at_ms == 9
    assert m.to_event("heartbeat", _rec("B", "heartbeats", *enc_heartbeat(Mm2Heartbeat("C", "B", 5)))) is None
    assert m.to_event("heartbeat", _rec("B", "C.heartbeats", *enc_heartbeat(Mm2Heartbeat("A", "C", 5)))) is None
    ours = Heartbeat(flow="A->B", replicator_id="r", origin_cluster="A", hop_path=("A",), origin_timestamp_ms=1)
    assert m.to_event("heartbeat", _rec("B", "A.heartbeats", b"A->B", encode(ours))) is None


def test_imported_syncs_translate_no_further_than_mm2_copied():
    """Equal-delta syncs join into one covered run; past a run's last sync, right after it (as MM2)."""
    m = Mm2EventMapper(policy_from_config(PolicyConfig()), "A", "B")
    # MM2 copied u 0..29 to d 0..29, u 32..59 (u 30, 31: transaction markers) to d 30..57;
    # syncs at the first record, every 10 records, and after the gap
    points = [(0, 0), (10, 10), (20, 20), (32, 30), (42, 40), (52, 50)]
    index = MappingIndex()
    index.add(
        m.to_event(
            "offset_sync",
            _rec("A", "mm2-offset-syncs.B.internal", *enc_offset_sync(Mm2OffsetSync("t", 0, u, d)), offset=i),
        )
        for i, (u, d) in enumerate(points)
    )
    for c in range(0, 21):
        assert index.translate("A->B", "t", 0, c).downstream == c  # exact inside the joined run
    assert index.translate("A->B", "t", 0, 25).downstream == 21  # after the run's last known copy
    assert index.translate("A->B", "t", 0, 31).downstream == 21  # never past a record not known copied
    assert index.translate("A->B", "t", 0, 45).downstream == 43
    assert index.translate("A->B", "t", 0, 55).downstream == 51
