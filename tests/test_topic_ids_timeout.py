"""A DescribeTopics answer that never comes is a Kafka timeout (waited out as an outage), not a bare
TimeoutError that ended a flow (the 2026-12-02 evening soak, twice)."""

from __future__ import annotations

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from replicator.metadata.topic_ids import topic_ids


def test_a_cluster_that_does_not_answer_is_a_kafka_timeout_naming_the_topic():
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1", "socket.connection.setup.timeout.ms": 1000})
    try:
        topic_ids(admin, ["orders"], timeout_s=1.0)
    except KafkaException as exc:
        err = exc.args[0]
        assert err.code() in (KafkaError._TIMED_OUT, KafkaError._TRANSPORT), err
        if err.code() == KafkaError._TIMED_OUT:
            assert "orders" in err.str()
    else:
        raise AssertionError("topic_ids answered for a cluster that does not exist")
