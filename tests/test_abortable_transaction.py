"""An exactly-once flow's transaction that failed abortably is aborted and rewound, never fatal.

CI of 4375ff8 (``test_broker_faults[target-kill-eos]``): the target came back after 31 s, librdkafka
marked the open transaction failed ("skipped sequence numbers, requires epoch bump"), and the
revoke's commit then produced the positions into it. ``produce`` into a failed transaction says only
``_STATE`` ("Erroneous state"), which is no ``txn_requires_abort`` error, so the flow died with
38,400 records not copied instead of aborting and copying them again.

Here a real broker fails the transaction the same way any rejected write does: one record over the
topic's ``max.message.bytes``.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirrorlake.traffic import ensure_topic
from replicator.flow.core.offset_sync import SyncOrigin
from replicator.flow.core.sync_ledger import SyncLedger
from replicator.flow.syncs.commits import TransactionalCommits
from replicator.kafka.clients import new_consumer, new_producer
from replicator.kafka.position_store import PositionStore

pytestmark = pytest.mark.kafka


class _Discard:
    def emit(self, event: object, on_durable: object = None) -> None:
        pass


def test_a_commit_into_a_transaction_that_failed_aborts_it_and_the_next_one_commits(kafka_clusters, unique_topic):
    bootstrap = kafka_clusters.bootstrap("B")
    small, positions, source = (unique_topic(f"abortable-{what}") for what in ("small", "positions", "source"))
    ensure_topic(bootstrap, small, 1, {"max.message.bytes": "1000"})
    ensure_topic(bootstrap, positions, 1, {"cleanup.policy": "compact"})
    ensure_topic(bootstrap, source, 1)
    producer = new_producer({"bootstrap.servers": bootstrap, "transactional.id": f"abortable-{uuid.uuid4().hex}"})
    consumer = new_consumer({"bootstrap.servers": bootstrap, "group.id": f"abortable-{uuid.uuid4().hex}"})
    store = PositionStore(positions, "A->B", {"bootstrap.servers": bootstrap}, topic_exists=True)
    ledger = SyncLedger(SyncOrigin("A->B", "abortable", "A", "B"), 100, _Discard(), producer.poll)
    commits = TransactionalCommits(consumer, producer, store, ledger, lambda: producer.flush(30), "A->B", 3600)
    consumer.assign([TopicPartition(source, 0)])  # the flow's partition: an abort rewinds it
    try:
        commits.start()
        failed: list[KafkaError] = []
        producer.produce(small, value=b"x" * 5000, on_delivery=lambda err, _msg: failed.append(err))
        producer.flush(30)
        assert failed and failed[0] is not None, "the broker accepted a record over max.message.bytes"
        with pytest.raises(KafkaException) as produced:  # what the position store's write meets
            producer.produce(positions, value=b"1")
        assert produced.value.args[0].code() == KafkaError._STATE

        commits.consumed((source, 0), 5)
        commits.after_batch(force=True)  # aborts the failed transaction instead of raising
        assert commits.positions() == {} and not commits.in_transaction and commits.commits == 0

        commits.consumed((source, 0), 5)
        commits.after_batch(force=True)
        assert commits.commits == 1
        assert store.read([(source, 0)]) == {(source, 0): 5}
    finally:
        consumer.close()
        producer.flush(10)
