"""State topics -> the bronze Delta table, with Spark Structured Streaming.

One streaming query per cluster that holds a state topic (every flow's target), each with its
own checkpoint, all appending to one bronze table. The Kafka source plus the Delta sink and the
checkpoint make each state-topic record land exactly once; ``available_now`` runs a batch that
stops at the current end, otherwise the query keeps running (``mirrorlake lakehouse serve``).
A flow's target that has no state topic yet (no flow into it has run) is skipped with a warning:
Spark's Kafka source would fail the whole build on it, and there is nothing there to ingest. The
bronze table is created before the queries start, so several of them never race to create it.
Bronze may also be written by ``ingest.kafka_bronze`` (``lakehouse serve``): a stream then goes on
from bronze's own positions, not from a checkpoint that is behind them (``spark_start``).
Bronze keeps the raw bytes: decoding happens downstream, so nothing is lost to a decoder bug.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from delta.tables import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from ingest.kafka_bronze import bronze_positions, spark_start
from ingest.paths import LakehousePaths
from replicator.config import MirrorlakeConfig
from replicator.errors import ConfigError, ReplicationError
from replicator.kafka.admin import admin_client, partition_counts

__all__ = ["state_clusters", "start_bronze_ingest", "kafka_options"]

_log = logging.getLogger(__name__)

# librdkafka names -> Java client names, for the settings that differ.
_JAVA_NAMES = {"sasl.mechanisms": "sasl.mechanism"}
_PASS_THROUGH_PREFIXES = ("security.protocol", "sasl.")
_JAAS_KEYS = ("sasl.username", "sasl.password")
# librdkafka's ssl.* -> the Java client's settings; a name not here has no Java counterpart
_SSL_TO_JAVA: dict[str, Callable[[str], dict[str, str]]] = {
    "ssl.ca.location": lambda v: {"ssl.truststore.type": "PEM", "ssl.truststore.location": v},
    "ssl.keystore.location": lambda v: {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": v},
    "ssl.keystore.password": lambda v: {"ssl.keystore.password": v},
    "ssl.key.password": lambda v: {"ssl.key.password": v},
    "ssl.endpoint.identification.algorithm": lambda v: {
        "ssl.endpoint.identification.algorithm": "" if v == "none" else v
    },
}


def state_clusters(config: MirrorlakeConfig) -> list[str]:
    """Aliases of the clusters that hold a state topic: the targets of the configured flows."""
    return sorted({flow.target for flow in config.flows})


def kafka_options(config: MirrorlakeConfig, alias: str) -> dict[str, str]:
    """Spark Kafka-source options for a cluster: bootstrap servers and its security settings.

    librdkafka's settings are translated to the Java client's: ``sasl.username``/``sasl.password``
    become a JAAS config (quotes and backslashes escaped), ``ssl.ca.location`` a PEM trust store,
    ``ssl.keystore.*`` a PKCS12 key store. An ``ssl.*`` setting without a Java counterpart is a
    ``ConfigError`` naming it (silently dropped, TLS would fail later with a vaguer error).
    """
    cluster = config.cluster(alias)
    options = {"kafka.bootstrap.servers": cluster.bootstrap_servers}
    client = {k: str(v) for k, v in cluster.client_config().items() if k != "bootstrap.servers"}
    for key, value in client.items():
        if key.startswith("ssl."):
            if key not in _SSL_TO_JAVA:
                raise ConfigError(
                    f"clusters.{alias}.client.{key}: the lakehouse's Spark Kafka source (a Java client) has no "
                    f"counterpart; use one of {', '.join(sorted(_SSL_TO_JAVA))}"
                )
            options.update({f"kafka.{k}": v for k, v in _SSL_TO_JAVA[key](value).items()})
        elif key.startswith(_PASS_THROUGH_PREFIXES) and key not in _JAAS_KEYS:
            options[f"kafka.{_JAVA_NAMES.get(key, key)}"] = value
    if "sasl.username" in client:
        module = (
            "org.apache.kafka.common.security.plain.PlainLoginModule"
            if client.get("sasl.mechanisms", "PLAIN").upper() == "PLAIN"
            else "org.apache.kafka.common.security.scram.ScramLoginModule"
        )
        username, password = _jaas_quoted(client["sasl.username"]), _jaas_quoted(client.get("sasl.password", ""))
        options["kafka.sasl.jaas.config"] = f"{module} required username={username} password={password};"
    return options


def _jaas_quoted(value: str) -> str:
    """A JAAS option value in double quotes; Kafka's JAAS parser (a StreamTokenizer) unescapes \\ and \"."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _raw_stream(spark: SparkSession, config: MirrorlakeConfig, alias: str, starting: str | None) -> DataFrame:
    reader = spark.readStream.format("kafka")
    for key, value in kafka_options(config, alias).items():
        reader = reader.option(key, value)
    raw = (
        reader.option("subscribe", config.state_topic)
        .option("kafka.isolation.level", "read_committed")  # exactly-once flows write events in transactions
        .option("startingOffsets", starting or "earliest")  # used by a new checkpoint only
        .option("maxOffsetsPerTrigger", 2_000_000)
        .load()
    )
    return raw.select(
        F.lit(alias).alias("cluster"),
        "topic",
        "partition",
        "offset",
        F.col("timestamp").alias("kafka_timestamp"),
        "key",
        "value",
        F.current_timestamp().alias("ingested_at"),
    )


def _create_if_missing(spark: SparkSession, stream: DataFrame, paths: LakehousePaths) -> None:
    """Create the empty bronze table before any query writes: two queries creating it at once (two
    state clusters, a new lakehouse) fail with Delta's ProtocolChangedException."""
    if not DeltaTable.isDeltaTable(spark, str(paths.bronze)):
        spark.createDataFrame([], stream.schema).write.format("delta").mode("append").save(str(paths.bronze))


def _state_partitions(config: MirrorlakeConfig, alias: str) -> int | None:
    """The state topic's partitions on ``alias``; None only when the cluster answers and lists no state
    topic (unreachable: 0, and the error is left to Spark's stream)."""
    try:
        return partition_counts(admin_client(config.cluster(alias).client_config())).get(config.state_topic)
    except ReplicationError:
        return 0


def start_bronze_ingest(
    spark: SparkSession,
    config: MirrorlakeConfig,
    paths: LakehousePaths,
    *,
    available_now: bool = True,
    trigger_seconds: float = 5.0,
) -> list[StreamingQuery]:
    """Start one query per state cluster; with ``available_now`` the caller awaits their end.

    Otherwise each query runs a micro-batch every ``trigger_seconds`` until stopped.
    """
    queries = []
    positions = bronze_positions(paths.bronze)  # the Kafka ingest (``lakehouse serve``) may have moved on
    for alias in state_clusters(config):
        partitions = _state_partitions(config, alias)
        if partitions is None:
            _log.warning(
                "cluster %s has no state topic %s yet (no flow into it has run): nothing to ingest from it",
                alias,
                config.state_topic,
            )
            continue
        checkpoint, starting = spark_start(paths, alias, config.state_topic, partitions, positions)
        stream = _raw_stream(spark, config, alias, starting)
        _create_if_missing(spark, stream, paths)
        writer = (
            stream.writeStream.format("delta")
            .outputMode("append")
            .option("checkpointLocation", str(paths.checkpoint(checkpoint)))
            .queryName(f"bronze-{alias}")
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        queries.append(writer.start(str(paths.bronze)))
        _log.info("bronze ingest from %s (%s) started", alias, config.state_topic)
    return queries
