"""mirrorlake's replicator: flows between Kafka clusters, with every piece of state as an event.

Imports and runs without pyspark (it is a library for replicator processes). The public surface:

    from replicator import Replicator, load_config
    replicator = Replicator(load_config("conf/local.yaml"))
    replicator.start(); ...; replicator.stop(); replicator.wait()

and, for consumers that fail over, MM2's RemoteClusterUtils served from the event log
(``translate_offsets``, ``replication_hops``, ``upstream_clusters``, ``heartbeat_topics``,
``checkpoint_topics``), plus the exact translation over offset syncs (``MappingIndex``,
``build_segments``, ``points_from_sync``, ``translate``) and the event-log reader
(``read_state_log``).
"""

from replicator.config import FlowConfig, MirrorlakeConfig, load_config, parse_config
from replicator.errors import MirrorlakeError
from replicator.mapping import Segment, Translation, build_segments, points_from_sync, translate
from replicator.mapping_index import MappingIndex
from replicator.mm2_import import ImportStats, Mm2Importer, import_mm2
from replicator.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy
from replicator.runtime import Replicator
from replicator.state_reader import StateLogFollower, read_state_log
from replicator.translation import (
    checkpoint_topics,
    heartbeat_topics,
    replication_hops,
    translate_offsets,
    upstream_clusters,
)

__all__ = [
    "DefaultReplicationPolicy",
    "FlowConfig",
    "IdentityReplicationPolicy",
    "ImportStats",
    "MappingIndex",
    "MirrorlakeConfig",
    "MirrorlakeError",
    "Mm2Importer",
    "ReplicationPolicy",
    "Replicator",
    "Segment",
    "StateLogFollower",
    "Translation",
    "build_segments",
    "checkpoint_topics",
    "heartbeat_topics",
    "import_mm2",
    "load_config",
    "parse_config",
    "points_from_sync",
    "read_state_log",
    "replication_hops",
    "translate",
    "translate_offsets",
    "upstream_clusters",
]
