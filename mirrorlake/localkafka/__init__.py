"""Local single-node KRaft Kafka clusters for development and tests (``mirrorlake clusters ...``).

``up``/``down``/``status`` act on every cluster of a configuration whose bootstrap address is a
single 127.0.0.1/localhost address; ``LocalBroker`` is one such broker; ``resolve_kafka_jars``
fetches Kafka's jars with Maven once per version.
"""

from mirrorlake.localkafka.broker import LocalBroker
from mirrorlake.localkafka.fleet import BrokerStatus, down, local_brokers, status, up
from mirrorlake.localkafka.jars import (
    kafka_lib_dir,
    require_java,
    require_mvn,
    resolve_kafka_jars,
)

__all__ = [
    "BrokerStatus",
    "LocalBroker",
    "down",
    "kafka_lib_dir",
    "local_brokers",
    "require_java",
    "require_mvn",
    "resolve_kafka_jars",
    "status",
    "up",
]
