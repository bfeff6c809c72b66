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

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> the module that defines it. Loaded on first use (PEP 562), so that
# ``import replicator.client...`` does not pay for the flow runtime, metrics server or MM2 importer.
_EXPORTS: dict[str, str] = {
    "DefaultReplicationPolicy": "replicator.client.policy",
    "FlowConfig": "replicator.config",
    "IdentityReplicationPolicy": "replicator.client.policy",
    "ImportStats": "replicator.mm2.importer",
    "MappingIndex": "replicator.client.mapping_index",
    "MirrorlakeConfig": "replicator.config",
    "MirrorlakeError": "replicator.errors",
    "Mm2Importer": "replicator.mm2.importer",
    "ReplicationPolicy": "replicator.client.policy",
    "Replicator": "replicator.flow.runtime",
    "Segment": "replicator.client.mapping",
    "StateLogFollower": "replicator.client.state_reader",
    "Translation": "replicator.client.mapping",
    "build_segments": "replicator.client.mapping",
    "checkpoint_topics": "replicator.client.translation",
    "heartbeat_topics": "replicator.client.translation",
    "import_mm2": "replicator.mm2.importer",
    "load_config": "replicator.config",
    "parse_config": "replicator.config",
    "points_from_sync": "replicator.client.mapping",
    "read_state_log": "replicator.client.state_reader",
    "replication_hops": "replicator.client.translation",
    "translate": "replicator.client.mapping",
    "translate_offsets": "replicator.client.translation",
    "upstream_clusters": "replicator.client.translation",
}

if TYPE_CHECKING:
    from replicator.client.mapping import Segment, Translation, build_segments, points_from_sync, translate
    from replicator.client.mapping_index import MappingIndex
    from replicator.client.policy import DefaultReplicationPolicy, IdentityReplicationPolicy, ReplicationPolicy
    from replicator.client.state_reader import StateLogFollower, read_state_log
    from replicator.client.translation import (
        checkpoint_topics,
        heartbeat_topics,
        replication_hops,
        translate_offsets,
        upstream_clusters,
    )
    from replicator.config import FlowConfig, MirrorlakeConfig, load_config, parse_config
    from replicator.errors import MirrorlakeError
    from replicator.flow.runtime import Replicator
    from replicator.mm2.importer import ImportStats, Mm2Importer, import_mm2


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'replicator' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_EXPORTS))


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
