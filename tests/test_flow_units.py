"""Unit tests of the flow runtime's pieces with small fakes (no broker): the sync ledger, commit
gating, the caught-up check, topic following and the copy hot path.

The same pieces run on real clusters in test_delivery.py, test_end_to_end.py and
test_scale_out_and_metrics.py; these pin their contracts where a broker cannot make every case
happen on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException, TopicPartition

from replicator.client.mapping import build_segments, points_from_sync, translate
from replicator.client.policy import DefaultReplicationPolicy
from replicator.client.provenance import PROVENANCE_HEADER, Provenance
from replicator.events import Event, OffsetSync, SyncReason
from replicator.flow.control.caught_up import CaughtUpCheck
from replicator.flow.copying.copier import PythonCopier
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.sync_ledger import SyncLedger
from replicator.flow.syncs.commits import AtLeastOnceCommits
from replicator.flow.topics.topic_follower import TopicFollower
from replicator.metadata.filters import RegexTopicFilter
from replicator.metadata.topics import RemoteTopic, TopicSelector
from replicator.metrics.stats import FlowStats

ORIGIN = SyncOrigin("A->B", "r1", "A", "B")


@dataclass
class FakeState:
    """The state topic: keeps what was emitted; ``ack`` makes the oldest unacknowledged durable."""

    emitted: list[Event] = field(default_factory=list)
    unacked: list[Callable[[], None] | None] = field(default_factory=list)
    full_for: int = 0  # raise BufferError this many times first

    def emit(self, event: Event, on_durable: Callable[[], None] | None = None) -> None:
        if self.full_for:
            self.full_for -= 1
            raise BufferError
        self.emitted.append(event)
        self.unacked.append(on_durable)

    def ack(self, n: int | None = None) -> None:
        n = len(self.unacked) if n is None else n
        for callback in self.unacked[:n]:
            if callback is not None:
                callback()
        del self.unacked[:n]


def ledger(lag_max: int = 100, state: FakeState | None = None, waits: list[float] | None = None) -> SyncLedger:
    return SyncLedger(ORIGIN, lag_max, state or FakeState(), (waits if waits is not None else []).append)


def deliver(led: SyncLedger, upstream: range, delta: int = 0, topic: str = "orders", partition: int = 0) -> None:
    for u in upstream:
        led.delivered(topic, partition, u, u + delta, 1000 + u, f"A.{topic}")


# -- the sync ledger -------------------------------------------------------------------------


def test_the_ledger_emits_complete_offset_sync_events_itself():
    state = FakeState()
    led = ledger(lag_max=5, state=state)
    deliver(led, range(0, 7))
    led.flush()
    led.publish()
    syncs = [e for e in state.emitted if isinstance(e, OffsetSync)]
    assert [(s.upstream_offset, s.reason) for s in syncs] == [
        (0, SyncReason.FIRST),
        (5, SyncReason.LAG_MAX),
        (6, SyncReason.FLUSH),
    ]
    first = syncs[0]
    assert (first.flow, first.replicator_id, first.source_cluster, first.target_cluster) == ("A->B", "r1", "A", "B")
    assert (first.source_topic, first.target_topic, first.upstream_timestamp_ms) == ("orders", "A.orders", 1000)
    assert first.event_id and first.emitted_at_ms > 0
    assert led.published == 3 and not led.has_pending


def test_commit_positions_never_pass_a_copy_whose_sync_is_not_durable():
    state = FakeState()
    led = ledger(lag_max=4, state=state)
    tp = ("orders", 0)
    deliver(led, range(0, 10))  # syncs at 0 (first), 4, 8 (lag_max)
    assert led.commit_positions([tp]) == {}  # nothing published yet
    led.publish()
    assert led.commit_positions([tp]) == {}  # published, not acknowledged
    state.ack(2)
    assert led.commit_positions([tp]) == {tp: 5}  # up to the sync of 4, not the copies after it
    assert not led.settled(tp)
    led.flush()
    led.publish()
    state.ack()
    assert led.commit_positions([tp]) == {tp: 10}
    assert led.settled(tp)


def test_advanced_positions_reports_each_move_once_and_only_for_assigned_partitions():
    state = FakeState()
    led = ledger(state=state)
    deliver(led, range(0, 3), partition=0)
    deliver(led, range(0, 3), partition=1)
    led.flush()
    led.publish()
    state.ack()
    assigned = {("orders", 0)}
    assert led.advanced_positions(assigned) == {("orders", 0): 3}
    assert led.advanced_positions(assigned) == {}  # nothing moved since
    assert led.commit_positions(assigned) == {("orders", 0): 3}  # the full view is still there


def test_a_full_producer_queue_is_waited_on_not_dropped():
    state, waits = FakeState(full_for=2), []
    led = ledger(state=state, waits=waits)
    deliver(led, range(0, 1))
    led.publish()
    assert waits == [0.05, 0.05]
    assert len(state.emitted) == 1


def test_a_forgotten_partition_starts_a_new_session():
    state = FakeState()
    led = ledger(state=state)
    deliver(led, range(0, 3))
    led.forget([("orders", 0)])
    assert led.settled(("orders", 0))  # nothing of it is known any more
    deliver(led, range(3, 4), delta=10)
    led.publish()
    assert [(s.upstream_offset, s.reason) for s in state.emitted] == [(0, SyncReason.FIRST), (3, SyncReason.FIRST)]


def test_forget_all_drops_pending_syncs_and_coverage():
    state = FakeState()
    led = ledger(state=state)
    deliver(led, range(0, 3))
    led.publish()
    state.ack()
    deliver(led, range(3, 5), delta=1)  # a delta change: pending
    led.forget_all()
    assert not led.has_pending
    assert led.commit_positions([("orders", 0)]) == {}


# -- at-least-once commit gating -------------------------------------------------------------


@dataclass
class FakeConsumer:
    stored: list[list[tuple[str, int, int]]] = field(default_factory=list)
    commits: int = 0
    assigned: list[TopicPartition] = field(default_factory=list)
    positions: dict[tuple[str, int], int] = field(default_factory=dict)

    def store_offsets(self, offsets: list[TopicPartition]) -> None:
        self.stored.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])

    def commit(self, asynchronous: bool = True) -> None:
        self.commits += 1

    def committed(self, partitions: list[TopicPartition], timeout: float = 0) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, OFFSET_INVALID) for tp in partitions]

    def assignment(self) -> list[TopicPartition]:
        return list(self.assigned)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.positions.get((tp.topic, tp.partition), OFFSET_INVALID))
            for tp in partitions
        ]


def test_after_batch_stores_only_positions_that_durable_syncs_moved():
    state, consumer = FakeState(), FakeConsumer()
    led = ledger(state=state)
    drains: list[int] = []
    commits = AtLeastOnceCommits(consumer, led, lambda: drains.append(1), "A->B", lambda: {("orders", 0)})  # type: ignore[arg-type]
    deliver(led, range(0, 5))
    commits.after_batch()
    assert consumer.stored == []  # copied, but no durable sync yet
    led.flush()
    led.publish()
    commits.after_batch()
    assert consumer.stored == []  # published, not acknowledged
    state.ack()
    commits.after_batch()
    commits.after_batch()
    assert consumer.stored == [[("orders", 0, 5)]]  # once, when it moved
    commits.before_revoke([TopicPartition("orders", 0)])
    assert drains == [1] and consumer.commits == 1
    assert consumer.stored[-1] == [("orders", 0, 5)]


# -- the caught-up check ---------------------------------------------------------------------


@dataclass
class FakeCommits:
    in_transaction: bool = False
    forced: int = 0

    def after_batch(self, force: bool = False) -> None:
        self.forced += force
        self.in_transaction = False

    def positions(self) -> dict[tuple[str, int], int]:
        return {}

    def committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 3) for tp in partitions]


def test_caught_up_needs_everything_read_acknowledged_and_covered():
    state, consumer = FakeState(), FakeConsumer(assigned=[TopicPartition("orders", 0)])
    led = ledger(state=state)
    ends = {("orders", 0): 3}
    check = CaughtUpCheck(consumer, FakeCommits(), led, lambda tps: {tp: ends[tp] for tp in tps})  # type: ignore[arg-type]
    assert not check(in_flight=1, following=True)  # a copy in flight
    consumer.positions[("orders", 0)] = 2
    assert not check(in_flight=0, following=True)  # not read to the end
    consumer.positions[("orders", 0)] = 3
    deliver(led, range(0, 3))
    led.publish()
    assert not check(in_flight=0, following=True)  # the first sync is published but not durable
    state.ack()
    assert not check(in_flight=0, following=True)  # copies 1, 2 are not covered: the check flushes
    assert led.has_pending
    led.publish()
    state.ack()
    assert check(in_flight=0, following=True)


def test_caught_up_uses_the_committed_position_of_a_partition_never_read_here():
    consumer = FakeConsumer(assigned=[TopicPartition("orders", 0)])
    check = CaughtUpCheck(consumer, FakeCommits(), ledger(), lambda tps: {tp: 3 for tp in tps})  # type: ignore[arg-type]
    assert check(in_flight=0, following=True)  # committed 3 (FakeCommits) == end 3


def test_caught_up_commits_an_open_transaction_first_and_waits_for_an_assignment():
    commits = FakeCommits(in_transaction=True)
    consumer = FakeConsumer()
    check = CaughtUpCheck(consumer, commits, ledger(), lambda tps: {})  # type: ignore[arg-type]
    assert not check(in_flight=0, following=True)
    assert commits.forced == 1
    assert not check(in_flight=0, following=True)  # topics selected, nothing assigned yet
    assert check(in_flight=0, following=False)  # nothing selected: nothing to copy


# -- topic following -------------------------------------------------------------------------


@dataclass
class FakeTopics:
    partitions: dict[str, int]
    ensured: list[list[str]] = field(default_factory=list)
    existing: set[str] = field(default_factory=set)

    def source_partitions(self) -> dict[str, int]:
        return dict(self.partitions)

    def ensure_remote_topics(self, topics: list[RemoteTopic]) -> list[RemoteTopic]:
        self.ensured.append(sorted(f"{r.target_topic}:{r.partitions}" for r in topics))
        made = [r for r in topics if r.target_topic not in self.existing]
        self.existing.update(r.target_topic for r in made)
        return made


def test_the_follower_subscribes_on_selection_changes_and_follows_new_partitions():
    selector = TopicSelector(
        DefaultReplicationPolicy(), RegexTopicFilter(("orders.*",), ()), source="A", target="B", own_topics=()
    )
    topics = FakeTopics({"orders": 2, "other": 1})
    subscribed: list[list[str]] = []
    seen: list[str] = []
    created: list[list[str]] = []
    follower = TopicFollower(
        "A->B",
        selector,
        topics,
        subscribed.append,
        seen.append,
        lambda rs: created.append([r.target_topic for r in rs]),
    )
    follower.refresh()
    assert subscribed == [["orders"]] and topics.ensured == [["A.orders:2"]] and created == [["A.orders"]]
    follower.refresh()
    assert subscribed == [["orders"]] and len(topics.ensured) == 1  # nothing changed
    assert follower.remote_for("orders", 1).target_topic == "A.orders" and seen == []
    topics.partitions["orders"] = 3
    assert follower.remote_for("orders", 2).partitions == 3  # a record from a partition newer than us
    assert seen == ["A.orders"] and topics.ensured[-1] == ["A.orders:3"]
    topics.partitions["orders-eu"] = 1
    follower.refresh()
    assert subscribed[-1] == ["orders", "orders-eu"]
    assert created == [["A.orders"], ["A.orders-eu"]]  # growing a topic is not creating it


# -- the copy hot path -----------------------------------------------------------------------


class FakeMessage:
    def __init__(self, topic: str, partition: int, offset: int, ts: int = 0, headers: list | None = None) -> None:
        self._t, self._p, self._o, self._ts, self._h = topic, partition, offset, ts, headers

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts) if self._ts else (0, -1)

    def headers(self) -> list | None:
        return self._h

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"value"


class FakeProducer:
    """Assigns downstream offsets per partition in produce order, as an idempotent producer does."""

    def __init__(self, foreign_every: int = 0) -> None:
        self.produced: list[tuple] = []
        self.reports: list[tuple] = []
        self._next: dict[tuple[str, int], int] = {}
        self._foreign_every = foreign_every

    def produce(self, topic, value, key, partition, callback, on_delivery, timestamp, headers) -> None:  # noqa: ANN001
        d = self._next.get((topic, partition), 0)
        if self._foreign_every and len(self.produced) % self._foreign_every == self._foreign_every - 1:
            d += 1  # someone else wrote to the target partition meanwhile
        self._next[(topic, partition)] = d + 1
        self.produced.append((topic, partition, d, timestamp, headers))
        self.reports.append((callback, topic, partition, d))

    def deliver_all(self, copier: PythonCopier) -> None:
        """A report for each copy produced with a callback, in produce order (what librdkafka does)."""
        for callback, topic, partition, d in self.reports:
            if callback is not None:
                callback(None, FakeMessage(topic, partition, d))
        self.reports.clear()
        self.produced.clear()


def copier_for(producer: FakeProducer, led: SyncLedger, *, provenance: bool = False) -> tuple[PythonCopier, FlowStats]:
    stats = FlowStats()
    remote = {"orders": RemoteTopic("orders", "A.orders", 2)}
    copier = PythonCopier("A->B", stats, Provenance("A", "B", enabled=provenance))
    copier.connect(producer, led, lambda topic, _p: remote[topic], lambda err: pytest.fail(str(err)))  # type: ignore[arg-type]
    return copier, stats


def test_the_copier_maps_every_delivery_back_to_its_source_record_exactly():
    state = FakeState()
    led = ledger(lag_max=1000, state=state)
    producer = FakeProducer(foreign_every=4)
    copier, stats = copier_for(producer, led)
    # two partitions interleaved in runs, with an upstream gap (a transaction marker) at 6
    batch = [FakeMessage("orders", 0, u, ts=5000 + u) for u in (0, 1, 2)]
    batch += [FakeMessage("orders", 1, u, ts=7000 + u) for u in (0, 1)]
    batch += [FakeMessage("orders", 0, u, ts=5000 + u) for u in (3, 4, 5, 7)]
    copier.copy_batch(batch)  # type: ignore[arg-type]
    assert copier.in_flight == 9 and stats.records == 9 and stats.batches == 1
    truth = {(m.partition(), m.offset()): d for m, (_t, _p, d, _ts, _h) in zip(batch, producer.produced, strict=True)}
    producer.deliver_all(copier)
    assert copier.in_flight == 0
    led.flush()
    led.publish()
    syncs = [s for s in state.emitted if isinstance(s, OffsetSync)]
    for s in syncs:  # every sync and its predecessor name a real copy: the mapping stays exact
        assert truth[(s.partition, s.upstream_offset)] == s.downstream_offset
        assert s.upstream_timestamp_ms == (5000 if s.partition == 0 else 7000) + s.upstream_offset
        if s.previous_upstream_offset is not None:
            assert truth[(s.partition, s.previous_upstream_offset)] == s.previous_downstream_offset
    reasons = {(s.partition, s.upstream_offset): s.reason for s in syncs}
    assert reasons[(0, 0)] == SyncReason.FIRST and reasons[(1, 0)] == SyncReason.FIRST
    assert reasons[(0, 7)] == SyncReason.DELTA_CHANGE  # the marker at 6 shifts the delta


def test_reports_of_copies_in_flight_when_a_partition_is_given_up_are_dropped():
    """A partition lost to a session expiry (no drain): the reports of its copies still in flight are of
    a session that ended; handed to the ledger they made syncs of a partition the process no longer
    held (the simulator: a late sync hid a killed peer's copies, and a late 'first' split the mapping).
    Their copies are recovered by content by the partition's next owner; a copy made after is tracked."""
    state = FakeState()
    led = ledger(lag_max=1000, state=state)
    producer = FakeProducer()
    copier, _stats = copier_for(producer, led)
    copier.copy_batch([FakeMessage("orders", p, u) for p in (0, 1) for u in range(4)])  # type: ignore[arg-type]
    copier.forget({("orders", 0)})
    led.forget([("orders", 0)])
    copier.copy_batch([FakeMessage("orders", 0, u) for u in (10, 11)])  # type: ignore[arg-type]  # taken again
    producer.deliver_all(copier)
    assert copier.in_flight == 0
    led.flush()
    led.publish()
    synced = sorted((s.partition, s.upstream_offset) for s in state.emitted if isinstance(s, OffsetSync))
    assert synced == [(0, 10), (0, 11), (1, 0), (1, 3)]  # nothing of partition 0 before it was given up


class FailingTxProducer(FakeProducer):
    """A transactional producer whose open transaction fails after ``ok`` produces: every later
    ``produce`` says ``_STATE``, and the abort purges what was produced (librdkafka's behaviour)."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self._ok = ok

    def produce(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003
        if len(self.produced) >= self._ok:
            raise KafkaException(KafkaError(KafkaError._STATE, "Unable to produce message: Local: Erroneous state"))
        super().produce(*args)

    def purge_all(self) -> None:
        for callback, topic, partition, d in self.reports:
            if callback is not None:
                callback(KafkaError(KafkaError._PURGE_QUEUE), FakeMessage(topic, partition, d))
        self.reports.clear()
        self.produced.clear()


@pytest.mark.parametrize("ok", [0, 1, 4, 9, 10])
def test_copies_into_a_failed_transaction_are_not_produced_and_nothing_stays_in_flight(ok: int):
    """CI of 4375ff8: a failed transaction's produce says ``_STATE``; the copier stops producing
    into it and names it (the runner aborts and rewinds), and the copies it produced untracked before
    the failure, which no later report acknowledges, leave ``in_flight`` so the drain ends."""
    producer = FailingTxProducer(ok)
    copier, _stats = copier_for(producer, ledger())
    copier.copy_batch([FakeMessage("orders", 0, u, ts=5000 + u) for u in range(10)])  # type: ignore[arg-type]
    assert len(producer.produced) == ok
    assert (copier.transaction_failed is not None) == (ok < 10) and copier.delivery_error is None
    producer.purge_all()  # the abort
    assert copier.in_flight == 0


def test_the_copier_passes_timestamps_and_headers_and_skips_records_that_would_loop():
    led = ledger()
    producer = FakeProducer()
    copier, stats = copier_for(producer, led, provenance=True)
    batch = [
        FakeMessage("orders", 0, 0, ts=1234, headers=[("h", b"x")]),
        FakeMessage("orders", 0, 1, headers=[(PROVENANCE_HEADER, b"B")]),  # came from the target
        FakeMessage("orders", 0, 2),
    ]
    copier.copy_batch(batch)  # type: ignore[arg-type]
    assert stats.skipped_cycle == 1 and stats.records == 2
    (_, _, _, ts0, h0), (_, _, _, ts2, h2) = producer.produced
    assert ts0 == 1234 and h0 == [("h", b"x"), (PROVENANCE_HEADER, b"A")]
    assert ts2 == 0 and h2 == [(PROVENANCE_HEADER, b"A")]  # no source timestamp: the target stamps one


# -- exactly-once commit gating --------------------------------------------------------------


@dataclass
class FakeTxProducer:
    calls: list[str] = field(default_factory=list)

    def init_transactions(self, timeout: float) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def commit_transaction(self, timeout: float) -> None:
        self.calls.append("commit")


@dataclass
class FakePositionStore:
    written: list[dict[tuple[str, int], int]] = field(default_factory=list)

    def write(self, producer: object, positions: dict[tuple[str, int], int]) -> None:
        self.written.append(dict(positions))


def test_a_transaction_commits_drained_records_then_only_the_positions_that_changed():
    from replicator.flow.syncs.commits import TransactionalCommits

    producer, store, drains = FakeTxProducer(), FakePositionStore(), []
    commits = TransactionalCommits(
        FakeConsumer(),  # type: ignore[arg-type]
        producer,  # type: ignore[arg-type]
        store,  # type: ignore[arg-type]
        ledger(),
        lambda: drains.append(len(producer.calls)),
        "A->B",
        interval_s=3600,
    )
    commits.start()
    commits.after_batch()
    assert producer.calls == ["init", "begin"] and not commits.in_transaction  # nothing consumed: no commit
    commits.consumed(("orders", 0), 5)
    commits.consumed(("orders", 1), 7)
    commits.after_batch()
    assert commits.in_transaction and producer.calls == ["init", "begin"]  # the interval is not over
    commits.after_batch(force=True)
    assert producer.calls == ["init", "begin", "commit", "begin"] and drains == [2]  # drained before commit
    assert store.written == [{("orders", 0): 5, ("orders", 1): 7}]
    commits.consumed(("orders", 0), 9)
    commits.close()
    assert store.written[-1] == {("orders", 0): 9}  # only what moved since the last transaction
    assert commits.positions() == {("orders", 0): 9, ("orders", 1): 7}


def _mapping_of(syncs: list[OffsetSync]) -> list:
    points = [
        p
        for s in syncs
        for p in points_from_sync(
            s.upstream_offset, s.downstream_offset, s.reason, s.previous_upstream_offset, s.previous_downstream_offset
        )
    ]
    return build_segments(points)


@pytest.mark.parametrize("foreign_every", [0, 7], ids=["target-owned", "foreign-writes"])
def test_run_length_tracking_asks_few_reports_and_keeps_translation_exact_or_rereading(foreign_every: int):
    """Reports only at run starts and ends and every offset_lag_max-th copy. With the target partition
    the flow's own, every offset translates exactly; with someone else writing among the copies, the
    copies in between leave the mapping, and a translation there resumes before them (re-read, never lost)."""
    state = FakeState()
    led = ledger(lag_max=100, state=state)
    producer = FakeProducer(foreign_every=foreign_every)
    stats = FlowStats()
    copier = PythonCopier("A->B", stats, Provenance("A", "B", enabled=False), track_every=100)
    remote = {"orders": RemoteTopic("orders", "A.orders", 1)}
    copier.connect(producer, led, lambda topic, _p: remote[topic], lambda err: pytest.fail(str(err)))  # type: ignore[arg-type]
    offsets = [u for u in range(1200) if u != 500]  # a marker at 500 on the source: two runs
    truth: dict[int, int] = {}
    for i in range(0, len(offsets), 400):  # three batches
        batch = [FakeMessage("orders", 0, u, ts=1000 + u) for u in offsets[i : i + 400]]
        copier.copy_batch(batch)  # type: ignore[arg-type]
        truth.update({u: d for u, (_t, _p, d, _ts, _h) in zip(offsets[i : i + 400], producer.produced, strict=True)})
        assert sum(1 for r in producer.reports if r[0] is not None) <= 400 // 100 + 4  # not one per copy
        producer.deliver_all(copier)
    assert copier.in_flight == 0 and stats.records == len(offsets)
    led.flush()
    led.publish()
    syncs = [s for s in state.emitted if isinstance(s, OffsetSync)]
    if not foreign_every:  # MM2's rule holds at its exact cadence: a sync at least every offset_lag_max records
        ds = sorted(s.downstream_offset for s in syncs)
        assert all(b - a <= 100 for a, b in zip(ds, ds[1:], strict=False))
        assert all(s.upstream_timestamp_ms == 1000 + s.upstream_offset for s in syncs)  # each its own record's
    segments = _mapping_of(syncs)
    for u in offsets:
        got = translate(segments, u)
        assert got is not None
        if foreign_every:
            assert got.downstream <= truth[u]  # resumes at or before the copy: re-reads, never loses
        else:
            assert got.downstream == truth[u], u


# -- a re-created topic's partitions: matched once, again when taken away uncommitted ----------------


def test_a_recreated_partition_is_matched_until_its_new_start_is_committed():
    from replicator.config import FlowConfig
    from replicator.flow.topics.topic_lives import TopicLives

    lives = TopicLives(FlowConfig(source="A", target="B"), "r", None, lambda _t: None, lambda _e: None, FlowStats(), {})  # type: ignore[arg-type]
    lives.pending_reset = {("acct", 0), ("acct", 1)}
    assert lives.relive([("acct", 0), ("other", 0)]) == [("acct", 0)]  # assigned: held and matched
    assert (lives.pending_reset, lives.reliving) == ({("acct", 1)}, {("acct", 0)})
    lives.relived([("acct", 0)], committed=False)  # revoked before its start was committed
    assert (lives.pending_reset, lives.reliving) == ({("acct", 0), ("acct", 1)}, set())
    assert lives.relive([("acct", 0), ("acct", 1)]) == [("acct", 0), ("acct", 1)]  # matched again
    lives.relived([("acct", 0), ("acct", 1)], committed=True)
    assert (lives.pending_reset, lives.reliving) == (set(), set())
    assert lives.relive([("acct", 0)]) == []  # its new life goes on from its commit
