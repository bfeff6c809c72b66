"""Offset translation and topology from the event log alone: mirrorlake's RemoteClusterUtils.

Everything here reads a cluster's state topic (and its topic list); neither the source cluster nor
the lakehouse is needed, which is the point during a failover, when the source may be gone.

- ``translate_offsets(config, "A->B", group)``: the group's latest checkpoint per partition, as
  ``{(target topic, partition): offset}`` to commit on B before the consumers start there.
- ``replication_hops(config, cluster, upstream)``: hops from ``upstream`` to ``cluster`` on the
  shortest path heartbeats took (-1 if none arrived, as MM2).
- ``upstream_clusters(config, cluster)``: every cluster whose heartbeats reached ``cluster``.
- ``heartbeat_topics`` / ``checkpoint_topics``: the topics on ``cluster`` that hold them.
"""

from __future__ import annotations

from collections.abc import Iterable

from replicator.client.policy import policy_from_config
from replicator.client.state_reader import read_state_log
from replicator.client.state_snapshot import load_snapshot
from replicator.config import MirrorlakeConfig
from replicator.errors import TranslationError
from replicator.events import Checkpoint, Event, Heartbeat
from replicator.kafka.admin import admin_client, partition_counts

__all__ = [
    "latest_checkpoints",
    "translate_offsets",
    "replication_hops",
    "upstream_clusters",
    "heartbeat_topics",
    "checkpoint_topics",
]


def latest_checkpoints(events: Iterable[Event], flow: str, group: str) -> dict[tuple[str, int], Checkpoint]:
    """The newest checkpoint of each partition of ``group`` on ``flow``, keyed by (target topic, partition)."""
    latest: dict[tuple[str, int], Checkpoint] = {}
    for e in events:
        if isinstance(e, Checkpoint) and e.flow == flow and e.group == group:
            key = (e.target_topic, e.partition)
            if key not in latest or latest[key].emitted_at_ms <= e.emitted_at_ms:
                latest[key] = e
    return latest


def _flow_target(config: MirrorlakeConfig, flow: str) -> str:
    source, sep, target = flow.partition("->")
    if not sep or not source or not target:
        raise TranslationError(f"flow {flow!r} is not written source->target (e.g. A->B)")
    config.cluster(source)
    config.cluster(target)
    return target


def translate_offsets(config: MirrorlakeConfig, flow: str, group: str) -> dict[tuple[str, int], Checkpoint]:
    """Where ``group`` resumes on the flow's target: the latest checkpoint of each partition.

    Reads the flow's state snapshot and the log after it (``replicator.client.state_snapshot``),
    so its cost does not grow with the age of the log; without a snapshot, the whole log.

    Raises ``TranslationError`` when the target's state topic holds no checkpoint of the group.
    """
    target = _flow_target(config, flow)
    conf = config.cluster(target).client_config()
    snap = load_snapshot(conf, config.state_topic, flow, mapping=False)
    start = snap.positions if snap else None
    read = read_state_log(conf, config.state_topic, event_types=["checkpoint"], start_offsets=start)
    events = [*(snap.latest.values() if snap else ()), *read.events]
    latest = latest_checkpoints(events, flow, group)
    if not latest:
        groups = sorted({e.group for e in events if isinstance(e, Checkpoint) and e.flow == flow})
        known = ", ".join(groups[:20]) or "none"
        raise TranslationError(f"no checkpoint of group {group!r} on flow {flow} (groups with checkpoints: {known})")
    return latest


def _heartbeats(config: MirrorlakeConfig, cluster: str) -> list[Heartbeat]:
    read = read_state_log(config.cluster(cluster).client_config(), config.state_topic, event_types=["heartbeat"])
    return [e for e in read.events if isinstance(e, Heartbeat) and e.hop_path and e.hop_path[-1] == cluster]


def replication_hops(config: MirrorlakeConfig, cluster: str, upstream: str) -> int:
    hops = [len(h.hop_path) - 1 for h in _heartbeats(config, cluster) if h.origin_cluster == upstream]
    return min(hops) if hops else -1


def upstream_clusters(config: MirrorlakeConfig, cluster: str) -> set[str]:
    return {h.origin_cluster for h in _heartbeats(config, cluster) if h.origin_cluster != cluster}


def heartbeat_topics(config: MirrorlakeConfig, cluster: str) -> list[str]:
    policy = policy_from_config(config.replication_policy)
    topics = partition_counts(admin_client(config.cluster(cluster).client_config()))
    return sorted(t for t in topics if policy.is_heartbeats_topic(t, config.heartbeats_topic))


def checkpoint_topics(config: MirrorlakeConfig, cluster: str) -> list[str]:
    """The state topic (mirrorlake's checkpoints) and any MM2 ``<alias>.checkpoints.internal``."""
    topics = partition_counts(admin_client(config.cluster(cluster).client_config()))
    return sorted(t for t in topics if t == config.state_topic or t.endswith(".checkpoints.internal"))
