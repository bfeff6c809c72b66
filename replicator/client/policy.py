"""Replication policies: how a topic replicated from cluster X is named on the target.

Mirrors Kafka's ``org.apache.kafka.connect.mirror.ReplicationPolicy``: ``DefaultReplicationPolicy``
prefixes the source alias (``A.orders``), which lets a name alone tell where a topic came from and
so prevents cycles; ``IdentityReplicationPolicy`` keeps the name, which cannot tell a local topic
from a remote one by name (MM2 warns it cannot prevent cycles; mirrorlake's provenance header can).
A custom policy is any class implementing ``ReplicationPolicy``, named ``module:Class`` in config.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod

from replicator.config import PolicyConfig
from replicator.errors import ConfigError

__all__ = [
    "ReplicationPolicy",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "policy_from_config",
]


_MAX_HOPS = 64


class ReplicationPolicy(ABC):
    """Names remote topics and recognises them; every method but two has a default."""

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """The name of ``topic`` from cluster ``source_alias`` on the target."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster ``topic`` was replicated from, or None for a local topic."""

    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream, or None for a local topic."""
        return None

    def original_topic(self, topic: str) -> str:
        """The topic's name on the cluster it was first written to (all hops removed)."""
        upstream = self.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return topic
        return self.original_topic(upstream)

    def source_chain(self, topic: str) -> list[str]:
        """The clusters ``topic`` was replicated through, origin first (``B.A.t`` -> ``[A, B]``).

        Empty for a local topic, or under a policy that cannot track sources. Bounded, so a
        custom policy whose ``upstream_topic`` never ends cannot loop.
        """
        chain: list[str] = []
        name: str | None = topic
        while name is not None and len(chain) < _MAX_HOPS and (alias := self.topic_source(name)) is not None:
            chain.append(alias)
            name = self.upstream_topic(name)
        return chain[::-1]

    def configure(self, config: PolicyConfig) -> None:  # noqa: B027 (optional hook, no-op by default)
        """Called once after construction of a custom policy, like MM2's ``configure(props)``."""

    def heartbeats_topic(self) -> str:
        return "heartbeats"

    def is_heartbeats_topic(self, topic: str, heartbeats: str) -> bool:
        """``topic`` is the heartbeats topic named ``heartbeats`` or a replica of it (``A.heartbeats``),
        as MM2's ``isHeartbeatsTopic``; the name is a setting here (``heartbeats_topic``)."""
        return self.original_topic(topic) == heartbeats

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}.checkpoints.internal"

    def is_internal_topic(self, topic: str) -> bool:
        """Kafka's and MM2's internal topics, never mirrored."""
        return (
            topic.startswith("__")
            or topic.startswith(".")
            or topic.endswith(".internal")
            or topic.endswith("-internal")
        )

    def can_track_source(self) -> bool:
        """Whether ``topic_source`` can recognise remote topics by name (cycle prevention)."""
        return True


class DefaultReplicationPolicy(ReplicationPolicy):
    """``<source alias><separator><topic>``; the separator defaults to ``.``."""

    def __init__(self, separator: str = ".") -> None:
        if not separator:
            raise ConfigError("replication_policy.separator must not be empty")
        self.separator = separator

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        alias, sep, _ = topic.partition(self.separator)
        return alias if sep and alias else None

    def upstream_topic(self, topic: str) -> str | None:
        alias, sep, rest = topic.partition(self.separator)
        return rest if sep and alias else None


class IdentityReplicationPolicy(ReplicationPolicy):
    """Keeps topic names unchanged; cannot detect cycles by name (the provenance header must)."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return topic

    def topic_source(self, topic: str) -> str | None:
        return None

    def can_track_source(self) -> bool:
        return False


def policy_from_config(config: PolicyConfig) -> ReplicationPolicy:
    """Build the configured policy: ``default``, ``identity``, or ``package.module:ClassName``."""
    name = config.class_
    if name in (
        "default",
        "DefaultReplicationPolicy",
        "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    ):
        return DefaultReplicationPolicy(config.separator)
    if name in (
        "identity",
        "IdentityReplicationPolicy",
        "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
    ):
        return IdentityReplicationPolicy()
    module_name, _, class_name = name.partition(":")
    if not class_name:
        raise ConfigError(f"replication_policy.class: {name!r} is neither 'default', 'identity' nor 'module:ClassName'")
    try:
        cls = getattr(importlib.import_module(module_name), class_name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"replication_policy.class: cannot load {name!r}: {exc}") from exc
    if not (isinstance(cls, type) and issubclass(cls, ReplicationPolicy)):
        raise ConfigError(f"replication_policy.class: {name!r} is not a ReplicationPolicy subclass")
    policy = cls()
    policy.configure(config)
    return policy
