"""The Kafka clients of one flow, made by a factory the ``FlowRunner`` is given.

``kafka_clients`` is the real one (librdkafka clients on the flow's two clusters, after waiting for
both to answer); tests of the runner's logic may pass a factory that returns fakes. The runner
never constructs a client itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Consumer, Producer

from replicator.config import FlowConfig, MirrorlakeConfig
from replicator.flow.control.outage import Outages
from replicator.flow.copying.copycore import copies_natively
from replicator.kafka.admin import admin_client
from replicator.kafka.clients import new_consumer, new_producer
from replicator.kafka.connectivity import wait_for_cluster
from replicator.kafka.position_store import PositionStore
from replicator.kafka.settings import consumer_config, idempotent_producer_config, producer_config
from replicator.metadata.acls import TopicAclSync
from replicator.metadata.topic_configs import DefaultConfigPropertyFilter, TopicConfigSync
from replicator.metadata.topic_deletions import RemoteTopicDeletions
from replicator.metadata.topics import TopicManager

__all__ = ["FlowClients", "ClientFactory", "kafka_clients"]


@dataclass
class FlowClients:
    """Everything a flow talks to Kafka through.

    ``producer`` copies records (its default delivery callback is the flow's) and, at-least-once,
    also writes the flow's syncs and lifecycle events; exactly-once flows write lifecycle events
    through ``lifecycle_producer``, outside the data transactions, and keep positions in ``positions``.
    ``copy_settings``: set when the flow copies on the compiled path (``NativeCopier``), whose own
    producer these settings make; ``producer`` then writes only syncs and lifecycle events.
    """

    consumer: Consumer
    producer: Producer
    lifecycle_producer: Producer
    topics: TopicManager
    config_sync: TopicConfigSync
    acl_sync: TopicAclSync
    topic_deletions: RemoteTopicDeletions
    outages: Outages
    positions: PositionStore | None = None
    copy_settings: dict[str, Any] | None = None


class ClientFactory(Protocol):
    def __call__(self, config: MirrorlakeConfig, flow: FlowConfig, *, replicator_id: str) -> FlowClients: ...


def kafka_clients(config: MirrorlakeConfig, flow: FlowConfig, *, replicator_id: str) -> FlowClients:
    """Wait for both clusters (``connect_timeout_seconds``), then make the flow's clients."""
    source_conf = config.cluster(flow.source).client_config()
    target_conf = config.cluster(flow.target).client_config()
    wait_for_cluster(flow.source, source_conf, timeout_s=config.connect_timeout_seconds)
    wait_for_cluster(flow.target, target_conf, timeout_s=config.connect_timeout_seconds)
    name = f"{replicator_id}-{flow.name}"
    instance = config.replicator_id or "main"
    outages = Outages(
        flow.name, {"source": flow.source, "target": flow.target}, {"source": source_conf, "target": target_conf}
    )
    consumer = new_consumer(
        {**consumer_config(flow, source_conf, f"{name}-consumer"), "error_cb": outages.client_error_callback("source")}
    )
    try:
        producer = new_producer(
            {
                **producer_config(flow, target_conf, f"{name}-producer", instance),
                # no default delivery callback: the copier asks for reports per copy (run-length tracking)
                "error_cb": outages.client_error_callback("target"),
            }
        )
        source_admin, target_admin = admin_client(source_conf), admin_client(target_conf)
        topics = TopicManager(source_admin, target_admin)
        clients = FlowClients(
            consumer=consumer,
            producer=producer,
            lifecycle_producer=producer,
            topics=topics,
            config_sync=TopicConfigSync(
                source_admin, target_admin, DefaultConfigPropertyFilter(flow.config_properties_exclude)
            ),
            acl_sync=TopicAclSync(source_admin, target_admin, deletions=flow.sync_acl_deletions),
            topic_deletions=RemoteTopicDeletions(source_admin, target_admin, enabled=flow.sync_topic_deletions),
            outages=outages,
        )
        if copies_natively(flow):
            clients.copy_settings = producer_config(flow, target_conf, f"{name}-copy", instance)
        if flow.exactly_once:
            # lifecycle events must not wait for (or vanish with) a data transaction
            clients.lifecycle_producer = new_producer(idempotent_producer_config(target_conf, f"{name}-lifecycle"))
            topics.ensure_state_topic(config.positions_topic, compacted=True)
            clients.positions = PositionStore(config.positions_topic, flow.name, target_conf, topic_exists=True)
        return clients
    except BaseException:
        consumer.close()  # it never joined the group; the other clients have nothing to leave
        raise
