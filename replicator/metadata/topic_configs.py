"""Topic configuration sync: what is set on a source topic is set on its remote topic.

As MM2 (``sync.topic.configs.enabled``): only configs set explicitly on the source topic
(``DYNAMIC_TOPIC_CONFIG``) are copied, so the target's own broker defaults still apply to the
rest; properties matched by the exclusion list are never copied. MM2's default list is kept:
throttled replicas, ``min.insync.replicas`` and ``unclean.leader.election.enable`` (the target's
durability is its own), and ``message.timestamp.type`` / ``...difference.max.ms`` /
``...before/after.max.ms`` (they would reject or re-stamp the copied CreateTime timestamps).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Protocol

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from replicator.config import DEFAULT_CONFIG_EXCLUDES
from replicator.config.patterns import compile_any
from replicator.errors import ReplicationError
from replicator.kafka.errors import kafka_error_reason

__all__ = [
    "ConfigPropertyFilter",
    "DefaultConfigPropertyFilter",
    "TopicConfigSync",
    "DEFAULT_CONFIG_EXCLUDES",
    "describe_topic_configs",
    "compacted_topics",
]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 10.0  # a silent cluster holds the copy loop no longer than this (then the flow waits)


class ConfigPropertyFilter(Protocol):
    def should_replicate_config_property(self, name: str) -> bool: ...


class DefaultConfigPropertyFilter:
    def __init__(self, exclude: Iterable[str] = DEFAULT_CONFIG_EXCLUDES) -> None:
        patterns = list(exclude)
        self._exclude = compile_any(patterns)

    def should_replicate_config_property(self, name: str) -> bool:
        return not (self._exclude is not None and self._exclude.fullmatch(name))


class TopicConfigSync:
    def __init__(self, source: AdminClient, target: AdminClient, config_filter: ConfigPropertyFilter) -> None:
        self._source = source
        self._target = target
        self._filter = config_filter
        self._compacted_only_on_target: set[str] = set()  # remote topics warned about (see _watch_compaction)

    def source_configs(self, topics: Iterable[str]) -> dict[str, dict[str, str]]:
        """The replicable configs set explicitly on each source topic."""
        return self._replicable(describe_topic_configs(self._source, topics))

    def _replicable(self, described: Mapping[str, Mapping[str, ConfigEntry]]) -> dict[str, dict[str, str]]:
        return {
            topic: {
                name: entry.value
                for name, entry in entries.items()
                if ConfigSource(entry.source) == ConfigSource.DYNAMIC_TOPIC_CONFIG  # an int in describe results
                and entry.value is not None
                and not entry.is_sensitive
                and self._filter.should_replicate_config_property(name)
            }
            for topic, entries in described.items()
        }

    def sync(self, remote_names: Mapping[str, str]) -> int:
        """Set on each remote topic what differs from its source topic; returns how many were set."""
        if not remote_names:
            return 0
        described = describe_topic_configs(self._source, remote_names)
        wanted = self._replicable(described)
        current = describe_topic_configs(self._target, remote_names.values())
        self._watch_compaction(remote_names, described, current)
        changes = []
        for topic, configs in wanted.items():
            remote = remote_names[topic]
            have = current.get(remote, {})
            diff = {k: v for k, v in configs.items() if k not in have or have[k].value != v}
            if diff:
                entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in diff.items()]
                changes.append(ConfigResource("topic", remote, incremental_configs=entries))
                _log.info("topic config sync %s -> %s: %s", topic, remote, ", ".join(sorted(diff)))
        if changes:
            for resource, future in self._target.incremental_alter_configs(changes).items():
                try:
                    future.result(timeout=_TIMEOUT_S)
                except KafkaException as exc:
                    raise ReplicationError(f"cannot set configs of {resource.name}: {exc}") from exc
        return sum(len(c.incremental_configs) for c in changes)

    def _watch_compaction(
        self,
        remote_names: Mapping[str, str],
        source: Mapping[str, Mapping[str, ConfigEntry]],
        target: Mapping[str, Mapping[str, ConfigEntry]],
    ) -> None:
        """One WARNING when a remote topic turns compacted while its source is not (and one when that
        ends). Nothing is altered: the target's policy is its operator's. But the cleaner then removes
        the copies of every record whose key repeats, and a group failing over loses those it has not
        read (the failover plan counts them, ``compacted_on_target``)."""
        for topic, remote in remote_names.items():
            if topic not in source or remote not in target:
                continue  # not described this time: judged at the next sync
            drifted = _compacts(target[remote]) and not _compacts(source[topic])
            if drifted and remote not in self._compacted_only_on_target:
                _log.warning(
                    "remote topic %s is compacted and its source topic %s is not: the log cleaner removes copies "
                    "of records whose key repeats, and a failover loses those a group has not read yet "
                    "(counted by the failover plan as compacted_on_target)",
                    remote, topic,
                )  # fmt: skip
                self._compacted_only_on_target.add(remote)
            elif not drifted and remote in self._compacted_only_on_target:
                _log.warning("remote topic %s is no longer compacted without its source %s", remote, topic)
                self._compacted_only_on_target.discard(remote)


def _compacts(entries: Mapping[str, ConfigEntry]) -> bool:
    policy = entries.get("cleanup.policy")
    return policy is not None and "compact" in (policy.value or "")


def describe_topic_configs(admin: AdminClient, topics: Iterable[str]) -> dict[str, dict[str, ConfigEntry]]:
    """Every config entry of each topic (defaults included); topics that fail are logged and left out."""
    resources = [ConfigResource("topic", t) for t in topics]
    if not resources:
        return {}
    out = {}
    for resource, future in admin.describe_configs(resources).items():
        try:
            out[resource.name] = future.result(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            _log.warning("cannot describe configs of topic %s: %s", resource.name, exc)
    return out


def compacted_topics(admin: AdminClient, topics: Iterable[str]) -> set[str]:
    """The topics among ``topics`` whose effective ``cleanup.policy`` includes ``compact``.

    A topic that cannot be described is an error naming it: a reader that silently took a
    compacted topic for a plain one would count copies the cleaner removed as present.
    """
    wanted = sorted(set(topics))
    if not wanted:
        return set()
    out: set[str] = set()
    futures = admin.describe_configs([ConfigResource("topic", t) for t in wanted], request_timeout=_TIMEOUT_S)
    for resource, future in futures.items():
        try:
            entries = future.result(timeout=_TIMEOUT_S)
        except KafkaException as exc:
            raise ReplicationError(
                f"cannot describe the configs of topic {resource.name}: {kafka_error_reason(exc)}"
            ) from exc
        if _compacts(entries):
            out.add(resource.name)
    return out
