"""Topic ACL sync with MM2's safety rules (``sync.topic.acls.enabled``), and opt-in deletions.

Only ALLOW bindings on replicated topics are copied, to the remote topic's name; WRITE is never
copied (only the replicator writes remote topics) and ALL becomes READ. Every binding the sync
creates is a decision (``AclDecision``, recorded by the flow as a ``metadata_change`` event), so
the flow knows which target bindings are its own (``CreatedAcls``, fed back from those events).
With ``deletions`` on (``sync_acl_deletions``, as Orbit and Shadowing do), a binding the flow
created is deleted once the source binding it copies is gone; a binding anyone else made is never
touched, and nothing is deleted in a round whose source ACLs could not be read.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)

from replicator.kafka.errors import kafka_error

__all__ = ["TopicAclSync", "AclDecision", "CreatedAcls", "acl_text", "target_binding", "describe_topic_acls"]

_log = logging.getLogger(__name__)
_TIMEOUT_S = 10.0  # a silent cluster holds the copy loop no longer than this (then the flow waits)
# None matches any name, principal and host (the stubs say str; the API documents None as "any")
_ALL_TOPIC_ACLS = AclBindingFilter(
    ResourceType.TOPIC,
    None,  # type: ignore[arg-type]
    ResourcePatternType.ANY,
    None,  # type: ignore[arg-type]
    None,  # type: ignore[arg-type]
    AclOperation.ANY,
    AclPermissionType.ANY,
)


def target_binding(binding: AclBinding, remote_name: str) -> AclBinding | None:
    """The binding to create on the target, or None if MM2's rules forbid copying it."""
    if binding.permission_type != AclPermissionType.ALLOW or binding.operation == AclOperation.WRITE:
        return None
    operation = AclOperation.READ if binding.operation == AclOperation.ALL else binding.operation
    return AclBinding(
        ResourceType.TOPIC,
        remote_name,
        binding.resource_pattern_type,
        binding.principal,
        binding.host,
        operation,
        AclPermissionType.ALLOW,
    )


def describe_topic_acls(admin: AdminClient) -> list[AclBinding]:
    """Every ACL binding on a topic resource (raises KafkaException, e.g. SECURITY_DISABLED)."""
    return list(admin.describe_acls(_ALL_TOPIC_ACLS).result(timeout=_TIMEOUT_S))


def acl_text(b: AclBinding) -> str:
    """A binding without its resource, as events carry it: ``pattern_type|principal|host|operation|permission``."""
    parts = (b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
    return "|".join(str(getattr(p, "name", p)) for p in parts)


@dataclass(frozen=True)
class AclDecision:
    """One decision about a target binding: ``created``, ``deleted`` or ``failed`` (``reason``)."""

    action: str
    topic: str  # the remote topic
    source_topic: str
    acl: str  # the target binding (``acl_text``)
    source_acl: str  # the source binding it copies
    reason: str | None = None


class CreatedAcls:
    """The target bindings a flow created and has not deleted: (remote topic, acl) -> (source topic,
    source acl). Fed by the flow's ``metadata_change`` events (every process's, read back from the
    state log) and by this process's own decisions at once; read by the sync's thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._created: dict[tuple[str, str], tuple[str, str]] = {}

    def take(self, action: str, topic: str, acl: str, source_topic: str, source_acl: str) -> None:
        with self._lock:
            if action == "created":
                self._created[(topic, acl)] = (source_topic, source_acl)
            elif action == "deleted":
                self._created.pop((topic, acl), None)

    def items(self) -> list[tuple[tuple[str, str], tuple[str, str]]]:
        with self._lock:
            return sorted(self._created.items())


class TopicAclSync:
    """Creates the copies of source bindings on the target; with ``deletions``, deletes the copies it
    created whose source binding is gone. ``sync`` returns its decisions; the caller records them."""

    def __init__(self, source: AdminClient, target: AdminClient, *, deletions: bool = False) -> None:
        self._source = source
        self._target = target
        self._deletions = deletions
        self._disabled_reason: str | None = None
        self.created = CreatedAcls()

    def sync(self, remote_names: Mapping[str, str]) -> list[AclDecision]:
        """Create missing target bindings for the replicated topics (and delete stale ones the flow
        created, with deletions on); the decisions made."""
        if self._disabled_reason or not remote_names:
            return []
        source = self._describe(self._source, "source")
        target = self._describe(self._target, "target")
        if source is None or target is None:
            return []
        existing = {_key(b) for b in target}
        wanted: list[tuple[AclBinding, AclBinding, str]] = []
        for binding in source:
            remote = remote_names.get(binding.name)
            copy = target_binding(binding, remote) if remote else None
            if copy is not None and _key(copy) not in existing:
                wanted.append((copy, binding, binding.name))
                existing.add(_key(copy))
        decisions = []
        if wanted:
            futures = self._target.create_acls([copy for copy, _b, _t in wanted])
            for copy, binding, source_topic in wanted:
                decision = _outcome("created", futures[copy], copy, binding, source_topic)
                decisions.append(decision)
                self._take(decision)
        if self._deletions:
            decisions += self._delete_stale(source, target)
        return decisions

    def _delete_stale(self, source: list[AclBinding], target: list[AclBinding]) -> list[AclDecision]:
        """Delete each binding the flow created whose source binding no longer exists."""
        on_source = {(b.name, acl_text(b)) for b in source}
        on_target = {(b.name, acl_text(b)): b for b in target}
        stale = [
            (on_target[key], source_key)
            for key, source_key in self.created.items()
            if key in on_target and source_key not in on_source
        ]
        if not stale:
            return []
        filters = [_exactly(b) for b, _s in stale]
        futures = self._target.delete_acls(filters)
        decisions = []
        for (binding, (source_topic, source_acl)), f in zip(stale, filters, strict=True):
            try:
                futures[f].result(timeout=_TIMEOUT_S)
                decision = AclDecision(
                    "deleted", binding.name, source_topic, acl_text(binding), source_acl,
                    f"{source_acl} is gone from {source_topic} on the source",
                )  # fmt: skip
                _log.info("acl sync: deleted %s (its source binding is gone)", binding)
            except KafkaException as exc:
                decision = AclDecision(
                    "failed", binding.name, source_topic, acl_text(binding), source_acl, f"delete: {exc}"
                )
                _log.warning("acl sync: cannot delete %s: %s", binding, exc)
            decisions.append(decision)
            self._take(decision)
        return decisions

    def _take(self, decision: AclDecision) -> None:
        self.created.take(decision.action, decision.topic, decision.acl, decision.source_topic, decision.source_acl)

    def _describe(self, admin: AdminClient, side: str) -> list[AclBinding] | None:
        try:
            return describe_topic_acls(admin)
        except KafkaException as exc:
            err = kafka_error(exc)
            if isinstance(err, KafkaError) and err.code() == KafkaError.SECURITY_DISABLED:
                self._disabled_reason = f"the {side} cluster has no authorizer"
                _log.info("acl sync off: %s", self._disabled_reason)
                return None
            _log.warning("acl sync: cannot describe %s ACLs: %s", side, exc)
            return None


def _outcome(action: str, future: object, copy: AclBinding, binding: AclBinding, source_topic: str) -> AclDecision:
    try:
        future.result(timeout=_TIMEOUT_S)  # type: ignore[attr-defined]
    except KafkaException as exc:
        _log.warning("acl sync: cannot create %s: %s", copy, exc)
        return AclDecision("failed", copy.name, source_topic, acl_text(copy), acl_text(binding), f"create: {exc}")
    _log.info("acl sync: created %s", copy)
    return AclDecision(action, copy.name, source_topic, acl_text(copy), acl_text(binding))


def _exactly(b: AclBinding) -> AclBindingFilter:
    return AclBindingFilter(
        b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type
    )


def _key(b: AclBinding) -> tuple:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
