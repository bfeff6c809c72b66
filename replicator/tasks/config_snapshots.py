"""Config snapshots: each replicated topic's partitions, effective configs and ACLs, on both sides.

"Effective" means every value the broker applies, defaults included (``describe_configs`` with
each entry's source), so a difference in a broker default between clusters is visible even when
no topic override differs. ACLs are kept as ``principal|host|operation|permission|pattern|name``
strings, sorted. A snapshot is emitted when its digest changes (``reason=changed``, or
``initial`` for the first), and re-emitted unchanged every ``config_snapshots_refresh_seconds``
(``periodic``) so the log always holds a recent one. A topic missing on the target is a snapshot
with ``exists=false``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding, ConfigSource

from replicator.events import ConfigSnapshot
from replicator.kafka.admin import admin_client, partition_counts
from replicator.kafka.errors import kafka_error
from replicator.metadata.acls import describe_topic_acls
from replicator.metadata.topic_configs import describe_topic_configs
from replicator.tasks.base import STATE_LANE, TaskContext

__all__ = ["ConfigSnapshotTask", "acl_string", "snapshot_digest"]

_log = logging.getLogger(__name__)


def acl_string(b: AclBinding) -> str:
    """``principal|host|operation|permission|pattern_type|name`` (describe results hold enums)."""
    parts = (b.principal, b.host, b.operation, b.permission_type, b.resource_pattern_type, b.name)
    return "|".join(getattr(p, "name", str(p)) for p in parts)


def snapshot_digest(partitions: int, configs: dict[str, str], acls: tuple[str, ...], exists: bool) -> str:
    doc = json.dumps([exists, partitions, sorted(configs.items()), list(acls)], separators=(",", ":"))
    return hashlib.sha256(doc.encode()).hexdigest()


class ConfigSnapshotTask:
    name = "config-snapshots"
    in_final_round = True
    lane = STATE_LANE

    def __init__(self, ctx: TaskContext, source_conf: dict[str, Any], target_conf: dict[str, Any]) -> None:
        self._ctx = ctx
        self.interval_s = ctx.flow.config_snapshots_interval_seconds
        self._admins = {"source": admin_client(source_conf), "target": admin_client(target_conf)}
        self._last: dict[tuple[str, str], tuple[str, float]] = {}  # (side, topic) -> digest, emitted at
        self._acls_off: set[str] = set()

    def _acls(self, side: str) -> dict[str, list[str]]:
        if side in self._acls_off:
            return {}
        try:
            bindings = describe_topic_acls(self._admins[side])
        except KafkaException as exc:
            err = kafka_error(exc)
            if isinstance(err, KafkaError) and err.code() == KafkaError.SECURITY_DISABLED:
                self._acls_off.add(side)  # no authorizer: no ACLs, now or later
            return {}
        out: dict[str, list[str]] = {}
        for b in bindings:
            out.setdefault(b.name, []).append(acl_string(b))
        return out

    def run(self) -> None:
        flow = self._ctx.flow
        remote = self._ctx.remote_topics()
        now = time.monotonic()
        for side, cluster in (("source", flow.source), ("target", flow.target)):
            admin = self._admins[side]
            names = {r.name_on(side): r.source_topic for r in remote.values()}
            counts = partition_counts(admin)
            configs = describe_topic_configs(admin, [n for n in names if n in counts])
            acls = self._acls(side)
            for topic, source_topic in names.items():
                exists = topic in counts
                effective = {k: e.value for k, e in configs.get(topic, {}).items() if e.value is not None}
                sources = {k: ConfigSource(e.source).name for k, e in configs.get(topic, {}).items()}
                topic_acls = tuple(sorted(acls.get(topic, [])))
                partitions = counts.get(topic, 0)
                digest = snapshot_digest(partitions, effective, topic_acls, exists)
                last = self._last.get((side, topic))
                if last is not None and last[0] == digest and now - last[1] < flow.config_snapshots_refresh_seconds:
                    continue
                reason = "initial" if last is None else ("changed" if last[0] != digest else "periodic")
                self._last[(side, topic)] = (digest, now)
                self._ctx.emit(
                    ConfigSnapshot(
                        flow=flow.name,
                        replicator_id=self._ctx.replicator_id,
                        cluster=cluster,
                        side=side,
                        topic=topic,
                        source_topic=source_topic,
                        exists=exists,
                        partitions=partitions,
                        configs=effective,
                        config_sources=sources,
                        acls=topic_acls,
                        digest=digest,
                        reason=reason,
                    ),
                )

    def close(self) -> None:
        pass
