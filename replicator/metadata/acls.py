"""Topic ACL sync with MM2's safety rules (``sync.topic.acls.enabled``).

Only ALLOW bindings on replicated topics are copied, to the remote topic's name; WRITE is never
copied (only the replicator writes remote topics) and ALL becomes READ. Nothing is deleted on
the target: a binding removed on the source stays until an operator removes it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

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

__all__ = ["TopicAclSync", "target_binding", "describe_topic_acls"]

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


class TopicAclSync:
    def __init__(self, source: AdminClient, target: AdminClient) -> None:
        self._source = source
        self._target = target
        self._disabled_reason: str | None = None

    def sync(self, remote_names: Mapping[str, str]) -> int:
        """Create missing target bindings for the replicated topics; returns how many were created."""
        if self._disabled_reason or not remote_names:
            return 0
        source = self._describe(self._source, "source")
        target = self._describe(self._target, "target")
        if source is None or target is None:
            return 0
        existing = {_key(b) for b in target}
        wanted = []
        for binding in source:
            remote = remote_names.get(binding.name)
            copy = target_binding(binding, remote) if remote else None
            if copy is not None and _key(copy) not in existing:
                wanted.append(copy)
                existing.add(_key(copy))
        if wanted:
            for binding, future in self._target.create_acls(wanted).items():
                try:
                    future.result(timeout=_TIMEOUT_S)
                    _log.info("acl sync: created %s", binding)
                except KafkaException as exc:
                    _log.warning("acl sync: cannot create %s: %s", binding, exc)
        return len(wanted)

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


def _key(b: AclBinding) -> tuple:
    return (b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation, b.permission_type)
