"""Configuration: the YAML model (every key declared once), MM2 properties translated to it, and
the flow graph's rules (cycles, policies). No Kafka I/O here."""

from replicator.config.loading import load_config
from replicator.config.model import (
    DEFAULT_CONFIG_EXCLUDES,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE,
    ClusterConfig,
    FlowConfig,
    LakehouseConfig,
    LocalKafkaConfig,
    MirrorlakeConfig,
    PolicyConfig,
    SparkConfig,
    parse_config,
)

__all__ = [
    "DEFAULT_CONFIG_EXCLUDES",
    "DEFAULT_GROUPS_EXCLUDE",
    "DEFAULT_TOPICS_EXCLUDE",
    "ClusterConfig",
    "FlowConfig",
    "LakehouseConfig",
    "LocalKafkaConfig",
    "MirrorlakeConfig",
    "PolicyConfig",
    "SparkConfig",
    "load_config",
    "parse_config",
]
