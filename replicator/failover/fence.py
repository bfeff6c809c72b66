"""The fence of a planned cutover: DENY Write ACLs on a flow's source topics, and whether it holds.

Kafka's authorizers give a DENY binding precedence over every ALLOW, so one binding per topic
(``User:*`` from any host denied WRITE) stops every producer that the authorizer sees, transactional
and idempotent ones included, while reads go on (the flow's own principal only reads its source
topics; its consumers keep consuming to the end). Two kinds of writer escape any ACL: super users
(``super.users`` skip the authorizer) and a listener whose principal is a super user (such as an
unauthenticated ``User:ANONYMOUS`` listed there). So a fence is never trusted on its own:
``settled`` watches the topics' log ends for a settle time, and a fence that does not hold is an
error naming the partitions that grew. A cluster with no authorizer cannot be fenced by ACLs: a
clear refusal before anything is written.

A binding travels as text (``TOPIC|LITERAL|orders|User:*|*|WRITE|DENY``) in the ``cutover`` events,
so ``failback apply --unfence`` deletes exactly the bindings the fence created, and nothing else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from confluent_kafka import IsolationLevel, KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
)

from replicator.errors import FailoverError
from replicator.kafka.admin import ADMIN_TIMEOUT_S, offsets_of
from replicator.kafka.errors import kafka_error, kafka_error_reason

__all__ = ["FENCE_PRINCIPAL", "binding_text", "fence_bindings", "raise_fence", "lift_fence", "Settle", "settled"]

_log = logging.getLogger(__name__)
FENCE_PRINCIPAL = "User:*"  # every principal the authorizer sees; super users are beyond any ACL


def fence_bindings(topics: Sequence[str]) -> list[AclBinding]:
    """One DENY WRITE binding per topic, for every principal from every host."""
    return [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            FENCE_PRINCIPAL,
            "*",
            AclOperation.WRITE,
            AclPermissionType.DENY,
        )
        for topic in sorted(set(topics))
    ]


def binding_text(binding: AclBinding) -> str:
    """``resource|pattern|name|principal|host|operation|permission``: what the events carry."""
    fields = (
        binding.restype,
        binding.resource_pattern_type,
        binding.name,
        binding.principal,
        binding.host,
        binding.operation,
        binding.permission_type,
    )
    return "|".join(str(getattr(v, "name", v)) for v in fields)  # enums by name


def _filter_of(text: str) -> AclBindingFilter:
    try:
        restype, pattern, name, principal, host, operation, permission = text.split("|")
        return AclBindingFilter(
            ResourceType[restype],
            name,
            ResourcePatternType[pattern],
            principal,
            host,
            AclOperation[operation],
            AclPermissionType[permission],
        )
    except (ValueError, KeyError) as exc:
        raise FailoverError(f"a cutover event names an ACL binding that is not one: {text!r}") from exc


def _refusal(cluster: str, exc: KafkaException, doing: str) -> FailoverError:
    err = kafka_error(exc)
    if err is not None and err.code() == KafkaError.SECURITY_DISABLED:
        return FailoverError(
            f"cluster {cluster} runs no authorizer (authorizer.class.name is not set), so no ACL can fence its "
            "producers: stop them yourself, then use failover apply --planned without --fence"
        )
    return FailoverError(f"cannot {doing} on {cluster}: {kafka_error_reason(exc)}")


def raise_fence(admin: AdminClient, cluster: str, topics: Sequence[str]) -> list[str]:
    """Create the fence's bindings on ``cluster`` (creating one that exists changes nothing); their texts."""
    bindings = fence_bindings(topics)
    if not bindings:
        raise FailoverError(f"nothing to fence on {cluster}: the flow selects no source topic there")
    try:
        for future in admin.create_acls(bindings, request_timeout=ADMIN_TIMEOUT_S).values():
            future.result(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        raise _refusal(cluster, exc, "create the fence's DENY Write ACLs") from exc
    texts = [binding_text(b) for b in bindings]
    _log.info("fence raised on %s: %s", cluster, ", ".join(texts))
    return texts


def lift_fence(admin: AdminClient, cluster: str, acls: Sequence[str]) -> int:
    """Delete exactly the bindings named (a fence's texts) on ``cluster``; how many were there."""
    filters = [_filter_of(text) for text in acls]
    if not filters:
        return 0
    try:
        deleted = [
            future.result(timeout=ADMIN_TIMEOUT_S)
            for future in admin.delete_acls(filters, request_timeout=ADMIN_TIMEOUT_S).values()
        ]
    except KafkaException as exc:
        raise _refusal(cluster, exc, "delete the fence's ACLs") from exc
    return sum(len(matches) for matches in deleted)


@dataclass(frozen=True)
class Settle:
    """Log ends seen over one settle window: ``grew`` (partition -> offsets added) empty means it held."""

    ends: dict[tuple[str, int], int]
    grew: dict[tuple[str, int], int]
    open_transactions: tuple[tuple[str, int], ...]  # partitions whose last stable offset is behind the end

    def held(self) -> bool:
        return not self.grew and not self.open_transactions

    def reason(self) -> str:
        parts = [f"{t}[{p}] +{n}" for (t, p), n in sorted(self.grew.items())[:8]]
        opened = [f"{t}[{p}]" for t, p in self.open_transactions[:8]]
        why = []
        if parts:
            why.append("written past the fence: " + ", ".join(parts))
        if opened:
            why.append("a transaction is still open on " + ", ".join(opened))
        return "; ".join(why)


def settled(admin: AdminClient, cluster: str, partitions: Sequence[tuple[str, int]], settle_s: float) -> Settle:
    """Watch the log ends of ``partitions`` for ``settle_s``: what grew, and which hold an open transaction.

    The end (high watermark) counts every write, an aborted one included; a transaction left open by
    a fenced producer keeps its partition's last stable offset behind the end until its coordinator
    aborts it (``transaction.timeout.ms``), and that abort marker moves the end once more."""
    try:
        before = offsets_of(admin, partitions, OffsetSpec.latest())
        time.sleep(settle_s)  # the settle time: an operation watching the cluster, not a test
        after = offsets_of(admin, partitions, OffsetSpec.latest())
        stable = offsets_of(admin, partitions, OffsetSpec.latest(), isolation=IsolationLevel.READ_COMMITTED)
    except KafkaException as exc:
        reason = kafka_error_reason(exc)
        raise FailoverError(f"cannot read the log ends of the fenced topics on {cluster}: {reason}") from exc
    grew = {k: after[k] - before[k] for k in after if after[k] > before.get(k, after[k])}
    opened = tuple(sorted(k for k in after if stable.get(k, after[k]) < after[k]))
    return Settle(after, grew, opened)
