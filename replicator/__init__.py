"""mirrorlake's replicator: flows between Kafka clusters, with every piece of state as an event.

Imports and runs without pyspark (it is a library for replicator processes). The public surface:

    from replicator import Replicator, load_config
    replicator = Replicator(load_config("conf/local.yaml"))
    replicator.start(); ...; replicator.stop(); replicator.wait()

and, for consumers that fail over, the exact translation over published offset syncs
(``build_segments``, ``points_from_sync``, ``translate``).
"""

from replicator.config import FlowConfig, MirrorlakeConfig, load_config, parse_config
from replicator.errors import MirrorlakeError
from replicator.mapping import Segment, Translation, build_segments, points_from_sync, translate
from replicator.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy
from replicator.runtime import Replicator

__all__ = [
    "DefaultReplicationPolicy",
    "FlowConfig",
    "IdentityReplicationPolicy",
    "MirrorlakeConfig",
    "MirrorlakeError",
    "ReplicationPolicy",
    "Replicator",
    "Segment",
    "Translation",
    "build_segments",
    "load_config",
    "parse_config",
    "points_from_sync",
    "translate",
]
